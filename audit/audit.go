package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Operations an Entry records.
const (
	OpPreview = "preview"
	OpApprove = "approve"
	OpDiscard = "discard"
	OpPause   = "pause"
	OpResume  = "resume"
	OpCancel  = "cancel"
	OpPark    = "park"
	OpCheck   = "check"
	OpResend  = "resend"
	// OpSamples: a preview's sample messages shown to someone who asked
	// for them (Slack's Show samples button).
	OpSamples = "samples"
	// OpFollow: someone followed a replay's progress (the terminal's
	// status --follow, the API's event stream).
	OpFollow = "follow"
	// OpAuthenticate: a request to the API or MCP endpoint refused
	// before it named a principal (no token, or an unknown one).
	OpAuthenticate = "authenticate"
	// OpSlackRequest: a request to the Slack endpoints refused before
	// it was acted on (a bad or stale signature: not from Slack or not
	// this app's; or the same signed request received again).
	OpSlackRequest = "slack_request"
	// OpSignIn: a sign-in to the dashboard with a token, done (the
	// principal it named) or refused (an unknown token, too many failed
	// sign-ins from one address). OpSignOut: a dashboard session ended.
	OpSignIn  = "sign_in"
	OpSignOut = "sign_out"
	// OpAlert: the DLQ watch posted an alert (new dead letters crossed a
	// watch rule's threshold); OpAlertResolved: the DLQ went back to its
	// baseline and the alert was marked resolved; OpSnooze: someone
	// silenced a DLQ's alerts for an hour.
	OpAlert         = "alert"
	OpAlertResolved = "alert_resolved"
	OpSnooze        = "snooze"
)

// Outcomes of an operation.
const (
	// OutcomeOK: the operation was done.
	OutcomeOK = "ok"
	// OutcomeRefused: the policy or the state refused it (Code says why);
	// nothing changed.
	OutcomeRefused = "refused"
	// OutcomeFailed: it was allowed but failed (a broker or Redis error).
	OutcomeFailed = "failed"
	// OutcomeBegun: an operation that changes something was allowed and
	// is about to take effect. It is appended before the effect, which
	// happens only when this entry was written; the operation's outcome
	// (ok or failed) is a later entry that Concludes it. A begun entry
	// with no outcome after it is an operation whose result was never
	// recorded (the process stopped, or the trail failed, after the
	// effect began).
	OutcomeBegun = "begun"
)

// Entry is one operation in the audit trail.
type Entry struct {
	// ID is assigned by the store when the entry is appended (a Redis
	// stream id, ordered by time); empty on Record.
	ID string `json:"id"`
	// Time is when the operation was decided.
	Time time.Time `json:"time"`
	// Principal is the policy's name for the caller (a principal's name,
	// or the Slack user id / terminal user when the policy has no name
	// for it).
	Principal string `json:"principal"`
	// Identity is the identity the policy checked: a Slack user id,
	// "api:<name>", "terminal:<os user>".
	Identity string `json:"identity"`
	// FrontEnd is where the call came from: "slack", "terminal", "api",
	// "mcp" or "dashboard".
	FrontEnd string `json:"front_end"`
	// Op is one of the Op constants.
	Op string `json:"op"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	// Code is the refusal's or failure's code (for example "forbidden",
	// "needs_second_person", "token_used"); empty when OutcomeOK.
	Code string `json:"code,omitempty"`
	// TokenRef names the preview token without revealing it (TokenRef);
	// a token is a capability and is never written to the trail or logs.
	TokenRef string `json:"token_ref,omitempty"`
	// ReplayID is the replay the operation concerned or created.
	ReplayID string `json:"replay_id,omitempty"`
	// Vhost and DLQ name the dead-letter queue concerned.
	Vhost string `json:"vhost,omitempty"`
	DLQ   string `json:"dlq,omitempty"`
	// Messages is how many messages the operation concerned (a preview's
	// or approval's size), when known.
	Messages int `json:"messages,omitempty"`
	// Detail is a short human sentence (never a payload byte).
	Detail string `json:"detail,omitempty"`
}

// TokenRef returns the reference under which a preview token appears in
// the audit trail and in logs: "t_" and the first 16 hex digits of its
// SHA-256. The same token always has the same reference; the reference
// cannot be turned back into the token.
func TokenRef(token string) string {
	if token == "" {
		return ""
	}
	h := sha256.Sum256([]byte(token))
	return "t_" + hex.EncodeToString(h[:8])
}

// Recorder appends entries to the trail. Record sets Entry.ID; an error
// means the entry was not appended.
type Recorder interface {
	Record(ctx context.Context, e Entry) error
}

// Filter selects entries; zero fields select everything.
type Filter struct {
	// Since and Until bound Entry.Time (inclusive, exclusive).
	Since, Until time.Time
	Principal    string
	FrontEnd     string
	Op           string
	Outcome      string
	DLQ          string
	ReplayID     string
	// After continues a listing after the entry with this ID.
	After string
	// Limit caps the entries returned; 0 means the reader's default.
	Limit int
}

// Reader reads the trail, oldest first.
type Reader interface {
	List(ctx context.Context, f Filter) ([]Entry, error)
}

// Nop is a Recorder that keeps nothing, for wiring without a trail.
type Nop struct{}

// Record does nothing.
func (Nop) Record(context.Context, Entry) error { return nil }
