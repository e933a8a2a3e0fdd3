package review

import (
	"fmt"
	"github.com/rs/zerolog"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/internal/tune"
	"github.com/stroma/dlqbot/engine/letter"
	"github.com/stroma/dlqbot/engine/proof"
	"sync"
	"time"
)

// Config tunes the engine. Zero values mean the documented defaults.
type Config struct {
	// ExcerptBytes is the longest payload excerpt (default 200 bytes;
	// negative: no excerpt at all).
	ExcerptBytes int
	// Vhost is the broker vhost the engine works in (default "/").
	Vhost string
	// LeaseTTL is how long a replay's lease lasts without a heartbeat
	// (default 15s); another process reports the replay interrupted soon
	// after it lapses.
	LeaseTTL time.Duration
	// ControlPoll is how often a running replay re-reads the state operators
	// asked for (default 200ms, so pause and cancel act within 1s).
	ControlPoll time.Duration
	// SettlePoll is how often a step's settling is checked (default 250ms).
	SettlePoll time.Duration
	// SettleGrace is how long a step waits, after its messages were all
	// delivered, for any of them to come back (default 3s), unless the
	// targets' counters prove sooner that every copy was delivered and
	// acked (engine/replay/settle_proof.go).
	SettleGrace time.Duration
	// CanaryDepth is how deep, in messages from the DLQ's head, a replay's
	// first step looks for failure classes (target × failure group): it
	// holds one copy of every class whose first selected message lies
	// within that depth, and fills the rest of the step with the first
	// messages in DLQ order (engine/plan.go). Classes first met deeper join in
	// the steps that reach them, one copy ahead of their bulk. Default
	// DefaultCanaryDepth (10,000, or the whole DLQ when it holds fewer);
	// negative: the first step is just the first messages in DLQ order.
	CanaryDepth int
	// FollowUps are when a finished or stopped replay is checked again
	// (default DefaultFollowUps: +5m, +2h, +24h).
	FollowUps []time.Duration
	// Dialect names the headers of an in-house framework's dead letters
	// (default: none; see HeaderDialect).
	Dialect letter.HeaderDialect
	// Log receives what the engine cannot return to a caller: background
	// errors (worker, reaper, taps, follow-ups) and failures it carries on
	// after while a replay runs, each with the replay_id, dlq and op fields
	// where known, a repeated one at most every 30s. The zero value logs
	// nothing.
	Log zerolog.Logger
	// Tune is the engine's own tests' tuning; zero values are the defaults;
	// nothing outside engine/ sets it (package engine/internal/tune).
	Tune tune.Knobs
}

func (c Config) WithDefaults() Config {
	if c.ExcerptBytes == 0 {
		c.ExcerptBytes = 200
	}
	if c.Vhost == "" {
		c.Vhost = "/"
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 15 * time.Second
	}
	if c.ControlPoll <= 0 {
		c.ControlPoll = 200 * time.Millisecond
	}
	if c.SettlePoll <= 0 {
		c.SettlePoll = 250 * time.Millisecond
	}
	if c.SettleGrace <= 0 {
		c.SettleGrace = 3 * time.Second
	}
	if len(c.FollowUps) == 0 {
		c.FollowUps = engine.DefaultFollowUps
	}
	if c.CanaryDepth == 0 {
		c.CanaryDepth = engine.DefaultCanaryDepth
	}
	c.Tune = c.Tune.WithDefaults()
	return c
}

// Deps are the engine's collaborators, all given to New: nothing is
// discovered or set later. New refuses a Deps without any of the ports
// production always sets (cmd/dlqbot's newEngine): Broker, Tokens, Ledger,
// Replays, Leases, Mover, Counters, Consumers, Watches, Schedule, Taps,
// Returns, Claims and TapGaps. Clock, Notifier, ScanObserver, Jobs,
// Registry and Redactor are optional.
type Deps struct {
	Broker  engine.Broker
	Tokens  engine.Tokens
	Ledger  engine.Ledger
	Replays engine.Replays
	Leases  engine.Leases
	// Mover moves messages (replays, parking).
	Mover engine.Mover
	// Clock tells the time; optional (default SystemClock).
	Clock engine.Clock
	// Counters reads the management API's queue counters, by which
	// settling is judged beside the ready count; required.
	Counters engine.CounterReader
	// Consumers lists a target's consumers and their connections, so a
	// preview can tell whether they were restarted since its messages
	// failed (a listing that fails leaves the verdict unknown); required.
	Consumers engine.ConsumerLister
	// Watches count what reaches a DLQ between a preview and its approval,
	// so an approval proves it unchanged without waiting for statistics
	// (a DLQ the adapter cannot watch waits for a management sample);
	// required.
	Watches engine.Watches
	// Notifier receives progress events; optional.
	Notifier engine.Notifier
	// ScanObserver is told about every completed preview scan, for
	// metrics; optional.
	ScanObserver engine.ScanObserver
	// Schedule holds follow-up checks; required.
	Schedule engine.Schedule
	// Taps and Returns find returns through a tap queue per DLQ instead of
	// re-reading it; both required (a DLQ the adapter cannot tap is
	// re-read).
	Taps    engine.Taps
	Returns engine.Returns
	// Jobs hands replays to the workers and Registry is where workers
	// announce themselves; optional. Work needs both. Without Jobs, a resume
	// (Control) hands nothing out and the caller runs the replay itself
	// (the terminal, when no worker is running), and Enqueue fails.
	Jobs     engine.Jobs
	Registry engine.Registry
	// Redactor hides what the operator's rules name in every preview's
	// view of a message (see redaction.go); optional (nothing hidden).
	Redactor engine.Redactor
	// Claims hands each message of a DLQ to one replay at a time, so that
	// overlapping replays send each once in all and name each other;
	// required.
	Claims engine.Claims
	// TapGaps records the windows a DLQ's tap was missing, so that checks
	// by any process know what the tap cannot have seen; required.
	TapGaps engine.TapGaps
}

// missing names the first port of d that New requires and d lacks, or "".
func (d Deps) missing() string {
	for _, p := range []struct {
		name string
		set  bool
	}{
		{"Broker", d.Broker != nil}, {"Tokens", d.Tokens != nil}, {"Ledger", d.Ledger != nil},
		{"Replays", d.Replays != nil}, {"Leases", d.Leases != nil}, {"Mover", d.Mover != nil},
		{"Counters", d.Counters != nil}, {"Consumers", d.Consumers != nil}, {"Watches", d.Watches != nil},
		{"Schedule", d.Schedule != nil}, {"Taps", d.Taps != nil}, {"Returns", d.Returns != nil},
		{"Claims", d.Claims != nil}, {"TapGaps", d.TapGaps != nil},
	} {
		if !p.set {
			return p.name
		}
	}
	return ""
}

// Base is what package review and package engine/replay share: the
// configuration and ports New validated, the rate-limited log of the
// failures carried on after, and when this process last saw each DLQ's
// tap, with the helpers both call (taps.go, ledger.go, readers.go's
// AwaitQuiet, approve_own.go's LiveHolders and LeftTo, redaction.go's
// ViewMeta, logthrottle.go's Warn).
type Base struct {
	cfg  Config
	d    Deps
	logs *logThrottle
	// tapSeen is, per DLQ, when this process last found its tap in
	// place (time.Time), the start of any window without it it notices.
	tapSeen sync.Map
}

// Config is the configuration New validated, defaults filled in.
func (s *Base) Config() Config { return s.cfg }

// Deps are the ports New validated (Clock set).
func (s *Base) Deps() Deps { return s.d }

// Service previews DLQs, checks replays, approves them and controls their state.
type Service struct {
	*Base `json:"-"`
	// prover proves at an approval that its preview's DLQ is unchanged
	// (package proof).
	prover *proof.Prover
}

// New validates cfg and deps and returns a Service. Every port Deps names
// required must be set (an error names the first missing); Clock defaults
// to the system clock.
func New(cfg Config, d Deps) (*Service, error) {
	if err := cfg.Dialect.Validate(); err != nil {
		return nil, fmt.Errorf("engine: new: %w", err)
	}
	if name := d.missing(); name != "" {
		return nil, fmt.Errorf("engine: new: Deps.%s is required", name)
	}
	if d.Clock == nil {
		d.Clock = engine.SystemClock{}
	}
	cfg = cfg.WithDefaults()
	return &Service{Base: &Base{cfg: cfg, d: d, logs: newLogThrottle(d.Clock, logEvery)}, prover: newProver(cfg, d)}, nil
}

// ParseMeta derives a message's metadata with the configured in-house
// dialect (ParseMetaDialect).
func (s *Base) ParseMeta(dlq string, m letter.Message) letter.Meta {
	return letter.ParseMetaDialect(dlq, m, s.cfg.Dialect)
}

func excerpt(body []byte, n int) string {
	if len(body) > n {
		body = body[:n]
	}
	out := make([]rune, 0, len(body))
	for _, r := range string(body) {
		if r == '\uFFFD' || (r < 0x20 && r != '\n' && r != '\t') {
			r = '.'
		}
		out = append(out, r)
	}
	return string(out)
}

// errStopScan ends a scan early once a limit is reached.
var errStopScan = fmt.Errorf("engine: scan limit reached")
