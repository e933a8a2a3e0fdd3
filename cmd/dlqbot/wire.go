package main

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/redact"
	"io"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/metrics"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// app holds the parts every subcommand shares.
type app struct {
	cfg     config
	log     zerolog.Logger
	dialect engine.HeaderDialect
	broker  *amqp.Broker
	rdb     redis.UniversalClient
	store   *store.Store
	// svc is set by newEngine, once its notifier and observer are built.
	svc *replay.Service
	// metrics is set by newReplica (serve, demo); nil in the terminal.
	metrics *metrics.Metrics
	// refused is where the store's refused records are counted: the
	// metrics, once newReplica built them.
	refused *atomic.Pointer[metrics.Metrics]
	// demoDashboard signs people in to the demo's dashboard when no
	// permissions file is set (access control stays off).
	demoDashboard *commands.Policy
	// signed says whether the store signs its records (a signing key is set).
	signed bool
	// handOff is newEngine's: whether approved replays go to the workers.
	handOff bool
	// audit records every operation through the operations layer: the
	// store's trail in Redis (store.Audit, set by openApp), which Slack,
	// the terminal, the API, MCP and the dashboard all write; tests may
	// set an in-memory one before the operations are built.
	audit audit.Recorder
	// ops and caller are the terminal's (terminalOps).
	ops    *ops.Ops
	caller ops.Caller
}

// loadPolicy reads the permissions file (DLQBOT_PERMISSIONS); nil without
// one.
func (a *app) loadPolicy() (*commands.Policy, error) {
	policy, err := commands.LoadPolicy(a.cfg.PermissionsFile)
	if err != nil {
		return nil, usageError("DLQBOT_PERMISSIONS: %w", err)
	}
	return policy, nil
}

// newOps builds the operations every front end calls, on a's engine and
// store, with policy (nil: access control off) and groups (Slack's user
// groups; nil without Slack). Without hand-off (the terminal) the caller
// runs approved replays itself.
func (a *app) newOps(policy *commands.Policy, groups commands.UserGroups) (*ops.Ops, error) {
	return ops.New(ops.Config{Policy: policy, RequireHuman: a.cfg.MCPRequireHuman, ScanLimit: a.cfg.ScanLimit,
		ScanWindow: a.cfg.ScanWindow, NoHandOff: !a.handOff},
		ops.Deps{Engine: a.svc, Tokens: a.store.Tokens(), Replays: a.store.Replays(), Windows: a.store.Windows(),
			Groups: groups, Audit: a.audit, Queues: a.broker, GroupsSeen: a.store.Alerts(), Arrivals: a.broker,
			Workers: a.store.Workers(), Jobs: a.store.Jobs(), Log: a.log})
}

// newApp wires RabbitMQ, Redis and an engine that notifies nobody (the
// terminal, `dlqbot mcp`): openApp, then newEngine. handOff is newEngine's:
// `dlqbot mcp` hands replays to the `dlqbot serve` workers; the terminal
// does not (follow.go hands a replay out or runs it itself).
func newApp(cfg config, logw io.Writer, handOff bool) (*app, error) {
	a, err := openApp(cfg, logw)
	if err != nil {
		return nil, err
	}
	if err := a.newEngine(nil, nil, handOff); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// openApp wires RabbitMQ and Redis. It dials nothing: the first operation
// that needs a connection opens it and reports a clear error when it
// cannot. The engine comes after (newEngine), given what it notifies.
func openApp(cfg config, logw io.Writer) (*app, error) {
	level := zerolog.InfoLevel
	if cfg.logLevel != nil {
		level = *cfg.logLevel
	}
	log := zerolog.New(logw).Level(level).With().Timestamp().Logger()
	// go-redis logs connection trouble itself (a process-wide setting): as
	// debug lines of ours, since each failure also comes back as an error.
	redis.SetLogger(redisLog{log})
	dialect, err := engine.ParseHeaderDialect(cfg.DialectHeaders)
	if err != nil {
		return nil, usageError("DLQBOT_DIALECT_HEADERS: %w", err)
	}
	rdb, err := store.Open(cfg.RedisURL)
	if err != nil {
		return nil, usageError("REDIS_URL: %w", err)
	}
	key, err := signingKey(cfg)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	sc := store.Config{Prefix: cfg.RedisPrefix, AuditRetention: cfg.AuditRetention,
		AuditMaxLen: cfg.AuditMaxEntries, AuditRate: cfg.AuditRate}
	refused := new(atomic.Pointer[metrics.Metrics])
	storeSigning(cfg, key, log, &sc, refused)
	st, err := store.New(sc, rdb, engine.SystemClock{})
	if err != nil {
		_ = rdb.Close()
		return nil, usageError("DLQBOT_REDIS_PREFIX: %w", err)
	}
	b, err := amqp.New(amqp.Config{URL: cfg.AMQPURL, ManagementURL: cfg.ManagementURL, HTTPTimeout: cfg.ManagementTimeout, ConnectionName: cfg.ConnectionName,
		ReadMarks: st.ReadMarks()}) // every replica budgets reads of a quorum DLQ alike
	if err != nil {
		_ = rdb.Close()
		return nil, usageError("AMQP_URL / RABBITMQ_MANAGEMENT_URL: %w", err)
	}
	return &app{cfg: cfg, log: log, dialect: dialect, broker: b, rdb: rdb, store: st, audit: st.Audit(), signed: key != nil, refused: refused}, nil
}

// newEngine builds a.svc on a's broker and store, notifying notifier and
// telling scans to observer (either may be nil). With handOff the engine
// has the store's job queue and worker registry: it can run workers (Work)
// and hands approved and resumed replays to them (Enqueue, Control).
// Without, Control's resume only records the request and the caller runs
// the replay.
func (a *app) newEngine(notifier engine.Notifier, observer engine.ScanObserver, handOff bool) error {
	b, st := a.broker, a.store
	deps := replay.Deps{
		Broker: b, Mover: b, Counters: b, Watches: b, Consumers: b,
		Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(),
		Notifier: notifier, ScanObserver: observer, Schedule: st.Schedule(),
		Taps: b, Returns: st.Returns(), Claims: st.Claims(), TapGaps: st.TapGaps(),
	}
	if handOff {
		deps.Jobs, deps.Registry = st.Jobs(), st.Workers()
	}
	// The policy's redaction applies to every front end this engine
	// serves, the terminal included; its excerpt size wins over the env's.
	policy, err := a.loadPolicy()
	if err != nil {
		return err
	}
	excerpt := a.cfg.ExcerptBytes
	if policy != nil {
		deps.Redactor = policy
		if n, ok := policy.ExcerptBytes(); ok {
			excerpt = n
			if n == 0 {
				excerpt = -1
			}
		}
	}
	cfg := a.engineConfig(excerpt)
	// Without hand-off the terminal runs an approved replay itself, right
	// after its approval (follow.go): the approval's read is kept for it.
	cfg.Tune.KeepReads = !handOff
	svc, err := replay.New(cfg, deps)
	if err != nil {
		return err
	}
	a.svc, a.handOff = svc, handOff
	return nil
}

// engineConfig is the engine's configuration from a's settings, with
// excerpt as its payload excerpt size (the env's, or the permissions
// file's when it sets one). A setting left unset is 0 here: the engine's
// default.
func (a *app) engineConfig(excerpt int) replay.Config {
	return replay.Config{
		Vhost:        a.broker.Vhost(),
		LeaseTTL:     a.cfg.LeaseTTL,
		CanaryDepth:  a.cfg.CanaryDepth,
		Dialect:      a.dialect,
		ExcerptBytes: excerpt,
		Log:          a.log.With().Str("component", "engine").Logger(),
	}
}

// ping checks that Redis answers, so a command fails before it reads any
// queue rather than half way.
func (a *app) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		return fmt.Errorf("redis at %s: %w", redact.URL(a.cfg.RedisURL), err)
	}
	return nil
}

// Close closes the connections, first logging at debug how many
// deliveries this process received from each queue it read (counted as
// they arrived: how many times it read each DLQ, whatever the management
// statistics say).
func (a *app) Close() {
	for q, n := range a.broker.DeliveredByQueue() {
		a.log.Debug().Str("queue", q).Int64("deliveries", n).Msg("amqp: deliveries received")
	}
	_ = a.broker.Close()
	_ = a.rdb.Close()
}

// giveBackWait bounds how long the terminal waits, before it exits, for
// the messages its reads gave back to show ready again (awaitGiveBacks).
const giveBackWait = time.Minute

// giveBackNote is how long awaitGiveBacks waits before it says so.
const giveBackNote = 2 * time.Second

// awaitGiveBacks waits, at most giveBackWait, until every queue the
// terminal's reads gave messages back to shows them ready again
// (amqp.Broker.AwaitGiveBacks): the broker applies a give-back after the
// read's channels closed, and the next command runs in a new process that
// cannot know they are still landing. A preview thus ends with the DLQ as
// it found it. A shortfall is logged, not returned: the command's outcome
// stands. A wait longer than giveBackNote is said on w (stderr), so that
// a command that printed its outcome does not seem to hang.
func (a *app) awaitGiveBacks(ctx context.Context, w io.Writer) {
	deadline := time.Now().Add(giveBackWait)
	first, cancel := context.WithTimeout(ctx, giveBackNote)
	err := a.broker.AwaitGiveBacks(first)
	cut := first.Err() != nil // giveBackNote passed
	cancel()
	if err != nil && cut && ctx.Err() == nil {
		fmt.Fprintln(w, "waiting for the messages dlqbot gave back to show ready in their queues again before exiting")
		rest, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		err = a.broker.AwaitGiveBacks(rest)
	}
	if err != nil {
		a.log.Warn().Err(err).Msg("not every message dlqbot gave back shows ready yet")
	}
}

// redisLog passes go-redis's own messages to zerolog at debug level.
type redisLog struct{ l zerolog.Logger }

func (r redisLog) Printf(_ context.Context, format string, v ...any) {
	r.l.Debug().Str("component", "go-redis").Msgf(format, v...)
}
