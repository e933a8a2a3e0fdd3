package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/redact"
)

// Codes of *Error: stable strings clients can switch on.
const (
	CodeAPIDisabled     = "api_disabled"        // no permissions file: the API is off
	CodeUnauthorized    = "unauthorized"        // missing or unknown bearer token
	CodeForbidden       = "forbidden"           // the principal lacks a permission
	CodeSecondPerson    = "needs_second_person" // the four-eyes rule: someone else has to approve
	CodeNeedsHuman      = "needs_human"         // the principal may not start replays itself
	CodeRateLimited     = "rate_limited"        // too many scans of this DLQ lately: Retry-After
	CodeReadBudget      = "read_budget"         // the read could make the broker drop messages
	CodeBadRequest      = "bad_request"         // malformed body or parameters
	CodeBadSelection    = "bad_selection"       // the selection does not parse
	CodeQueueNotFound   = "queue_not_found"     // the DLQ does not exist
	CodeTokenNotFound   = "token_not_found"     // unknown or expired preview token
	CodeTokenUsed       = "token_used"          // the token already started a replay
	CodeReplayNotFound  = "replay_not_found"    // unknown replay id
	CodeChanged         = "changed"             // the world changed since the preview: confirm
	CodeNotControllable = "not_controllable"    // the replay's state does not allow it
	CodeUnsupported     = "unsupported"         // something this bot cannot do (another vhost)
	CodeUnavailable     = "unavailable"         // RabbitMQ or Redis cannot be reached
	CodeTimeout         = "timeout"             // the work took too long and was abandoned
	CodeBadSignature    = "bad_signature"       // a record in Redis failed its signature check: refused
	CodeNotFound        = "not_found"           // no such endpoint
	CodeInternal        = "internal"            // anything else
)

// Error is a refusal or failure: Status for HTTP, Code for programs,
// Message (a sentence) for people. Changes and ChangesDigest are set with
// CodeChanged.
type Error struct {
	Status        int             `json:"-"`
	Code          string          `json:"code"`
	Message       string          `json:"error"`
	Changes       []engine.Change `json:"changes,omitempty"`
	ChangesDigest string          `json:"changes_digest,omitempty"`
	// RequestID is set on a fault inside dlqbot (a 5xx that is not a
	// known outage): the body says nothing of the fault, and the log has
	// its cause under this id.
	RequestID string `json:"request_id,omitempty"`
	// RetryAfter is set with CodeRateLimited (the Retry-After header).
	RetryAfter time.Duration `json:"-"`
	err        error
}

// Cause is the text of the error underneath (tokens scrubbed), for the
// log only; "" when there is none.
func (e *Error) Cause() string {
	if e.err == nil {
		return ""
	}
	return redact.Tokens(e.err.Error())
}

// faultSentence is what a client is told of a fault inside dlqbot: no
// detail, and the request id the log files it under.
func faultSentence(requestID string) string {
	return "That did not work because of a fault inside dlqbot; the operators can find what happened in dlqbot's log under request id " + requestID + "."
}

// Error returns the sentence.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.err }

func newError(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// asError words err for a client: a refusal by ops.Classify's table,
// an outage, a timeout or a fault. subject names what the call was about
// (a queue, a token, a replay id).
func asError(err error, subject string) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	if r, ok := ops.IsRefusal(ops.Classify(err, subject)); ok {
		return refusalError(r)
	}
	e := &Error{err: err}
	switch {
	case errors.Is(err, engine.ErrBrokerUnavailable):
		e.Status, e.Code, e.Message = http.StatusServiceUnavailable, CodeUnavailable, "RabbitMQ cannot be reached right now, so nothing was done. Try again shortly."
	case errors.Is(err, engine.ErrStoreUnavailable):
		e.Status, e.Code, e.Message = http.StatusServiceUnavailable, CodeUnavailable, "dlqbot's Redis cannot be reached right now, so nothing was done. Try again shortly."
	case errors.Is(err, context.DeadlineExceeded):
		e.Status, e.Code, e.Message = http.StatusGatewayTimeout, CodeTimeout, "That took too long and was abandoned; nothing was changed. Try again, perhaps with a narrower selection."
	default:
		e.RequestID = engine.NewID("req_")
		e.Status, e.Code, e.Message = http.StatusInternalServerError, CodeInternal, faultSentence(e.RequestID)
	}
	return e
}

// refusals maps each refusal code to its HTTP status and API code.
var refusals = map[ops.Code]struct {
	status int
	code   string
}{
	ops.Forbidden:         {http.StatusForbidden, CodeForbidden},
	ops.NeedsSecondPerson: {http.StatusForbidden, CodeSecondPerson},
	ops.NeedsHuman:        {http.StatusForbidden, CodeNeedsHuman},
	ops.TokenUsed:         {http.StatusConflict, CodeTokenUsed},
	ops.TokenExpired:      {http.StatusNotFound, CodeTokenNotFound},
	ops.Changed:           {http.StatusConflict, CodeChanged},
	ops.BadParams:         {http.StatusBadRequest, CodeBadRequest},
	ops.RateLimited:       {http.StatusTooManyRequests, CodeRateLimited},
	ops.NotControllable:   {http.StatusConflict, CodeNotControllable},
	ops.QueueNotFound:     {http.StatusNotFound, CodeQueueNotFound},
	ops.ReplayNotFound:    {http.StatusNotFound, CodeReplayNotFound},
	ops.Unsupported:       {http.StatusBadRequest, CodeUnsupported},
	ops.ReadBudget:        {http.StatusConflict, CodeReadBudget},
	ops.Unavailable:       {http.StatusServiceUnavailable, CodeUnavailable},
	ops.BadSignature:      {http.StatusConflict, CodeBadSignature},
}

// refusalError words a refusal of the operations layer for a client.
func refusalError(r *ops.Refusal) *Error {
	m, ok := refusals[r.Code]
	if !ok {
		m.status, m.code = http.StatusForbidden, string(r.Code)
	}
	e := &Error{Status: m.status, Code: m.code, Message: r.Reason, err: r, RetryAfter: r.RetryAfter}
	switch r.Code {
	case ops.Forbidden, ops.NeedsSecondPerson, ops.NeedsHuman:
		e.Message += " Nothing was done."
	case ops.Changed:
		var lines []string
		for _, ch := range r.Changes {
			lines = append(lines, ch.Detail)
		}
		e.Message += " Changes: " + strings.Join(lines, "; ") + ". To approve anyway, approve again with confirm_changes set to changes_digest; or preview again."
		e.Changes, e.ChangesDigest = r.Changes, r.Digest
	}
	return e
}
