package ops

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Defaults for Config.
const (
	DefaultScanLimit  = 30
	DefaultScanWindow = 10 * time.Minute
	DefaultListSize   = 20
	DefaultMaxList    = 200
)

// Config configures the operations. Zero values mean the documented
// defaults.
type Config struct {
	// Policy is the permissions file; nil means access control is off
	// (DLQBOT_ACCESS=open): every grant is allowed and no second person
	// is required.
	Policy *commands.Policy
	// RequireHuman (DLQBOT_MCP_REQUIRE_HUMAN) makes every caller with a
	// bearer token need a human unless its principal names a person
	// (as_user) and it comes through the dashboard or a terminal client
	// (see needsHuman): approving, resuming, cancelling and parking are
	// refused with NeedsHuman, and MCP's dlq_replay asks a person in
	// Slack.
	RequireHuman bool
	// ScanLimit is how many scans (previews and checks) one principal may
	// start on one DLQ within ScanWindow; default 30, negative turns the
	// limit off (DLQBOT_SCAN_LIMIT).
	ScanLimit int
	// ScanWindow is the scan limit's sliding window; default 10 minutes.
	ScanWindow time.Duration
	// NoHandOff leaves approved replays for the caller to run (the
	// terminal runs or hands out its replay itself); by default Approve
	// hands them to the workers (Engine.Enqueue).
	NoHandOff bool
}

func (c Config) withDefaults() Config {
	if c.ScanLimit == 0 {
		c.ScanLimit = DefaultScanLimit
	}
	if c.ScanWindow <= 0 {
		c.ScanWindow = DefaultScanWindow
	}
	return c
}

// Engine is what the operations ask of the engine; *replay.Service
// implements it.
type Engine interface {
	Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error)
	Compare(ctx context.Context, token string) (engine.Frozen, []engine.Change, error)
	ApproveConfirmed(ctx context.Context, token, approver, via string, p engine.Params, digest string) (engine.Approval, error)
	Control(ctx context.Context, id string, a engine.ControlAction, by string) (engine.Replay, error)
	Enqueue(ctx context.Context, id string) error
	Status(ctx context.Context, id string) (engine.Replay, error)
	Check(ctx context.Context, replayID, label string) (engine.CheckReport, error)
	Park(ctx context.Context, replayID, by string) (engine.ParkResult, error)
}

// Tokens reads and discards frozen previews; the store's Tokens
// implements it.
type Tokens interface {
	Load(ctx context.Context, token string) (engine.Frozen, error)
	// LoadHeader reads a frozen preview without its items (Total,
	// Distinct and TargetQueues still hold): what a permission check
	// needs.
	LoadHeader(ctx context.Context, token string) (engine.Frozen, error)
	Discard(ctx context.Context, token string) error
}

// Replays lists replay records; the store's Replays implements it.
type Replays interface {
	List(ctx context.Context, n int) ([]engine.Replay, error)
}

// Windows counts within sliding time windows, shared by every replica:
// the four-eyes threshold's self-approved messages and the scan rate
// limit. The store's Windows implements it.
type Windows interface {
	// Take adds n to the window key (of length window) when the sum of
	// what was taken within it stays at most limit, and returns what was
	// taken before (Used) and the take's id; when it would exceed limit it
	// takes nothing and reports when the oldest take leaves the window.
	Take(ctx context.Context, key string, n, limit int, window time.Duration) (Take, error)
	// Give removes take id from key's window (an approval that failed
	// after its take).
	Give(ctx context.Context, key, id string) error
}

// Take is the outcome of Windows.Take (engine.WindowTake, so that the
// store implements Windows without importing ops).
type Take = engine.WindowTake

// Asker asks a person in Slack to approve a preview made by a program;
// the Slack bot implements it (RequestApproval).
type Asker interface {
	RequestApproval(ctx context.Context, f engine.Frozen, p *engine.Preview) (channel, ts string, err error)
	// ApprovalChannel is the channel RequestApproval posts in ("" when
	// none is configured); the policy's channel allowlist is checked
	// against it before anything is posted.
	ApprovalChannel() string
}

// Deps are the operations' collaborators.
type Deps struct {
	Engine  Engine
	Tokens  Tokens
	Replays Replays
	// Windows holds the four-eyes threshold's counts and the scan rate
	// limit; required.
	Windows Windows
	// Groups tells a Slack user's user groups, asked only when the policy
	// names user groups; optional (then only grants by user id count).
	Groups commands.UserGroups
	// Audit records every operation; nil records nothing (audit.Nop).
	Audit audit.Recorder
	// Asker asks a person in Slack; optional (RequestApproval is then
	// refused as Unavailable).
	Asker Asker
	// Queues lists the broker's queues (ListDLQs); optional (ListDLQs
	// is then refused as Unavailable).
	Queues engine.QueueLister
	// GroupsSeen keeps the failure groups of each DLQ's latest whole
	// preview for its watch alerts; optional (alerts then ask for a
	// preview).
	GroupsSeen GroupsSeen
	// Arrivals counts what reached each listed DLQ in the last hour
	// (ListDLQs); optional (arrivals are then unknown).
	Arrivals ArrivalCounter
	// Workers and Jobs are the running workers and their job queue, for
	// HandOff (the terminal's replay and resume); optional (HandOff then
	// hands nothing out).
	Workers WorkerList
	Jobs    engine.Jobs
	Log     zerolog.Logger
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// Ops runs the operations. It is safe for concurrent use.
type Ops struct {
	cfg    Config
	d      Deps
	policy *commands.Policy
	log    zerolog.Logger
}

// New validates cfg and d and returns the operations.
func New(cfg Config, d Deps) (*Ops, error) {
	switch {
	case d.Engine == nil || d.Tokens == nil || d.Replays == nil:
		return nil, errors.New("ops: new: engine, tokens and replays are required")
	case d.Windows == nil:
		return nil, errors.New("ops: new: windows (the four-eyes threshold's counts and the scan limit) are required")
	}
	if d.Audit == nil {
		d.Audit = audit.Nop{}
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Ops{cfg: cfg.withDefaults(), d: d, policy: cfg.Policy, log: d.Log.With().Str("component", "ops").Logger()}, nil
}

// Policy returns the permissions policy (nil when access control is off).
func (o *Ops) Policy() *commands.Policy { return o.policy }

// AccessControl reports whether a policy is loaded.
func (o *Ops) AccessControl() bool { return o.policy != nil }

// SetAsker sets who asks a person in Slack, for wiring where the Slack
// bot is built after the operations; call it before serving.
func (o *Ops) SetAsker(a Asker) { o.d.Asker = a }
