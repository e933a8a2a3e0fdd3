package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Code says why an operation was refused; front ends switch on it to word
// the refusal in their idiom (an HTTP status, an ephemeral Slack reply, an
// exit status).
type Code string

// The refusal codes. Each refusal changed nothing.
const (
	// Forbidden: the caller lacks a grant, or is a terminal user the
	// policy does not name.
	Forbidden Code = "forbidden"
	// NeedsSecondPerson: the four-eyes rule: the requester may not
	// approve their own preview (or has self-approved enough out of this
	// DLQ within the window).
	NeedsSecondPerson Code = "needs_second_person"
	// NeedsHuman: the caller may not start or resume a replay itself; a
	// person has to (in Slack).
	NeedsHuman Code = "needs_human"
	// TokenUsed: the token already started a replay (or was discarded
	// after one).
	TokenUsed Code = "token_used"
	// TokenExpired: the token is unknown or has expired.
	TokenExpired Code = "token_expired"
	// Changed: the world changed since the preview; Changes and Digest
	// say what, and an approval confirming Digest goes ahead.
	Changed Code = "changed"
	// BadParams: a parameter or selection is not valid.
	BadParams Code = "bad_params"
	// RateLimited: too many scans of this DLQ by this principal lately;
	// RetryAfter says when the next is allowed.
	RateLimited Code = "rate_limited"
	// NotControllable: the replay's state does not allow it.
	NotControllable Code = "not_controllable"
	// QueueNotFound: the DLQ does not exist.
	QueueNotFound Code = "queue_not_found"
	// ReplayNotFound: there is no such replay.
	ReplayNotFound Code = "replay_not_found"
	// Unsupported: something dlqbot cannot do (another vhost).
	Unsupported Code = "unsupported"
	// ReadBudget: the read would bring the DLQ's messages near their
	// delivery limit.
	ReadBudget Code = "read_budget"
	// Unavailable: a part the operation needs is not configured (no Slack
	// to ask a person in).
	Unavailable Code = "unavailable"
	// BadSignature: a record dlqbot keeps in Redis (a frozen preview, a
	// replay record, Slack's record of where a replay shows) failed its
	// signature check: it was changed outside dlqbot, or written without
	// this signing key. Nothing is done with it; the refusal is logged at
	// Error level.
	BadSignature Code = "bad_signature"
)

// signedRecord is what a record refused by its signature tells about
// itself (the store's SignatureError): its kind and its id — a replay id,
// or a token's audit.TokenRef, never the token.
type signedRecord interface {
	Record() (kind, id string)
}

// Refusal is an operation that was not done: Code for programs, Reason (a
// sentence, plain text) for people. It wraps the engine error that
// decided it, when there was one, so errors.Is still sees it.
type Refusal struct {
	Code   Code
	Reason string
	// Changes and Digest are set with Changed.
	Changes []engine.Change
	Digest  string
	// RetryAfter is set with RateLimited.
	RetryAfter time.Duration
	// Queue or replay the refusal is about, when one is.
	Subject string
	err     error
}

// Error returns the sentence.
func (r *Refusal) Error() string { return r.Reason }

// Unwrap returns the error that decided the refusal, if any.
func (r *Refusal) Unwrap() error { return r.err }

// IsRefusal returns err's *Refusal, if it is one.
func IsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

func refuse(code Code, format string, a ...any) *Refusal {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, a...)}
}

// Classify turns an engine or policy error into a *Refusal where it is
// one (the state or the caller's request decided it, nothing changed);
// other errors — a broker or Redis failure — are returned as they are.
// It is the one table from error to sentence: every operation's error
// passes through it, and the API words the errors it meets outside the
// operations (a read of the trail or of a replay's events) with it too.
// subject names what the call was about (a queue, a token, a replay id).
func Classify(err error, subject string) error {
	if err == nil {
		return nil
	}
	if _, ok := IsRefusal(err); ok {
		return err
	}
	r := &Refusal{err: err, Subject: subject}
	var fe *commands.ForbiddenError
	var ce *commands.ChannelError
	var rbe *engine.ReadBudgetError
	switch {
	case errors.As(err, &fe):
		r.Code, r.Reason = Forbidden, fe.Error()
	case errors.As(err, &ce):
		// The policy's per-DLQ channel allowlist: Forbidden, as a
		// missing grant is, whichever front end asked.
		r.Code, r.Reason = Forbidden, ce.Error()
	case errors.Is(err, engine.ErrTokenNotFound):
		r.Code, r.Reason = TokenExpired, "That preview token is unknown or has expired (tokens last 24 hours): preview again to get a new one. Nothing was sent."
	case errors.Is(err, engine.ErrTokenUsed):
		r.Code, r.Reason = TokenUsed, "That preview was already approved: a token starts at most one replay. Nothing more was sent."
	case errors.Is(err, engine.ErrQueueNotFound):
		r.Code, r.Reason = QueueNotFound, fmt.Sprintf("There is no queue %q on the broker; check the name (and vhost).", subject)
	case errors.Is(err, engine.ErrReplayNotFound):
		r.Code, r.Reason = ReplayNotFound, fmt.Sprintf("There is no replay %q.", subject)
	case errors.Is(err, engine.ErrNotControllable):
		r.Code, r.Reason = NotControllable, fmt.Sprintf("Replay %s cannot do that in its state (%v); nothing was changed.", subject, err)
	case errors.Is(err, engine.ErrUnsupported):
		r.Code, r.Reason = Unsupported, "dlqbot cannot do that: "+err.Error()+". Nothing was done."
	case errors.As(err, &rbe):
		r.Code, r.Reason = ReadBudget, "Not done, to keep the broker from dropping messages: "+rbe.Error()+"."
	case errors.Is(err, engine.ErrBadSignature):
		what := "dlqbot's record of this"
		var sr signedRecord
		if errors.As(err, &sr) {
			kind, id := sr.Record()
			what = fmt.Sprintf("dlqbot's %s record %s", kind, id)
		}
		r.Code, r.Subject = BadSignature, ""
		r.Reason = what + " failed its signature check: refused. It was changed in Redis outside dlqbot, or written without this signing key, so nothing was done or sent; the operators have been alerted in dlqbot's log."
	default:
		return err
	}
	return r
}

// FailureCode names a failure (an error that is not a refusal) for the
// audit trail and for programs.
func FailureCode(err error) string {
	switch {
	case errors.Is(err, engine.ErrBrokerUnavailable), errors.Is(err, engine.ErrStoreUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "internal"
}
