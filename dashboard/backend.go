package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Backend is what the dashboard asks of the operations layer, always on
// behalf of the signed-in principal. Every method applies the policy for
// that principal; the dashboard only renders what it is given.
type Backend interface {
	// Replays returns up to n recent replays p may see, newest first.
	Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error)
	// Replay returns one replay p may see.
	Replay(ctx context.Context, p commands.Principal, id string) (engine.Replay, error)
	// Preview returns what the preview the replay was approved from found
	// (its token's engine.PreviewCard: problems and targets, never a
	// payload or an exception's text), when p may see the replay; nil
	// when the token keeps none or is no longer kept.
	Preview(ctx context.Context, p commands.Principal, id string) (*engine.PreviewCard, error)
	// Events returns the replay's logged events so far, oldest first, with
	// their log ids.
	Events(ctx context.Context, p commands.Principal, id string) ([]string, []engine.Event, error)
	// ServeEvents streams the replay's events after the log id after (""
	// for the start; a Last-Event-ID header wins) as server-sent events.
	ServeEvents(w http.ResponseWriter, r *http.Request, p commands.Principal, id, after string)
	// MayControl reports whether p may pause, resume or cancel (verb) the
	// replay, as the policy says; the state is the dashboard's to judge.
	MayControl(ctx context.Context, p commands.Principal, verb string, r engine.Replay) bool
	// Control pauses, resumes or cancels (verb) the replay for p, deciding
	// again whether p may; a refusal is an error the dashboard shows.
	Control(ctx context.Context, p commands.Principal, verb, id string) (engine.Replay, error)
	// DLQs returns the dead-letter queues p may read that dlqbot knows of.
	DLQs(ctx context.Context, p commands.Principal) ([]DLQ, error)
	// Audit returns the audit entries f selects that p may see, oldest
	// first.
	Audit(ctx context.Context, p commands.Principal, f audit.Filter) ([]audit.Entry, error)
}

// DLQ is one dead-letter queue as the dashboard shows it.
type DLQ struct {
	Name string
	// Exists is false when the broker does not have the queue (any more).
	Exists bool
	// Ready and Consumers are the broker's counts now.
	Ready, Consumers int
	// Targets are the queues its replays sent to, with their consumers.
	Targets []Target
	// Depths is the DLQ's message count at the end of each Bucket, oldest
	// first, the last one now (the management API's samples); nil when
	// unknown.
	Depths []int
	Bucket time.Duration
	// Problem says what could not be read ("" when nothing).
	Problem string
}

// Target is a queue replays of a DLQ send to.
type Target struct {
	Queue     string
	Exists    bool
	Consumers int
}
