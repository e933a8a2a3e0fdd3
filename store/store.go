package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// Defaults for Config.
const (
	DefaultPrefix     = "dlqbot:"
	DefaultTokenTTL   = 24 * time.Hour
	DefaultRetention  = 30 * 24 * time.Hour
	DefaultJobReclaim = 30 * time.Second
	DefaultJobsMaxLen = 10000
	// MinSigningKey is the shortest signing key accepted, in bytes.
	MinSigningKey = 32
)

// Config tunes the store; zero values mean the defaults.
type Config struct {
	// Prefix starts every key (DLQBOT_REDIS_PREFIX); default "dlqbot:". It
	// must not contain braces, which would break the Cluster hash tags.
	Prefix string
	// TokenTTL is how long a preview token lives when Save is given no TTL;
	// default 24h.
	TokenTTL time.Duration
	// Retention is how long replay records and the ledger are kept after
	// their last write; default 30 days, negative keeps them forever.
	Retention time.Duration
	// JobReclaim is how long a job handed to a worker may stay unacked
	// before Jobs.Next gives it to another worker; default 30s, negative
	// never reclaims.
	JobReclaim time.Duration
	// JobsMaxLen caps the job stream (approximately); default 10000.
	JobsMaxLen int64
	// AuditRetention is how long audit entries are kept
	// (DLQBOT_AUDIT_RETENTION); default 90 days, negative keeps them
	// forever.
	AuditRetention time.Duration
	// AuditMaxLen caps the audit trail's entries, the oldest trimmed
	// first (the chain's anchor keeps verification working); default
	// DefaultAuditMaxLen, negative: no cap.
	AuditMaxLen int64
	// AuditRate is how many audit entries one principal may add per
	// minute; default DefaultAuditRate, negative: no limit.
	AuditRate int
	// SigningKey signs frozen previews and replay records (signing.go);
	// it is never written to Redis. Empty: records are written unsigned,
	// and a signed record is refused (it cannot be checked).
	SigningKey []byte
	// AcceptUnsigned lets a store with a key read records written
	// unsigned (before signing was turned on); default false: refused.
	AcceptUnsigned bool
	// OnBadSignature is told of every record refused by its signature
	// check (to log it at Error); optional.
	OnBadSignature func(err *SignatureError)
}

func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return c, fmt.Errorf("store: prefix %q must not contain braces", c.Prefix)
	}
	switch {
	case c.TokenTTL == 0:
		c.TokenTTL = DefaultTokenTTL
	case c.TokenTTL < time.Millisecond:
		return c, fmt.Errorf("store: token TTL %s is too short", c.TokenTTL)
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	} else if c.Retention > 0 && c.Retention < time.Millisecond {
		return c, fmt.Errorf("store: retention %s is too short", c.Retention)
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = DefaultAuditRetention
	} else if c.AuditRetention > 0 && c.AuditRetention < time.Second {
		return c, fmt.Errorf("store: audit retention %s is too short", c.AuditRetention)
	}
	if c.AuditMaxLen == 0 {
		c.AuditMaxLen = DefaultAuditMaxLen
	}
	if c.AuditRate == 0 {
		c.AuditRate = DefaultAuditRate
	}
	if n := len(c.SigningKey); n > 0 && n < MinSigningKey {
		return c, fmt.Errorf("store: signing key of %d bytes is too short; use at least %d random bytes", n, MinSigningKey)
	}
	if c.JobReclaim == 0 {
		c.JobReclaim = DefaultJobReclaim
	}
	if c.JobsMaxLen == 0 {
		c.JobsMaxLen = DefaultJobsMaxLen
	} else if c.JobsMaxLen < 0 {
		return c, fmt.Errorf("store: negative jobs max length %d", c.JobsMaxLen)
	}
	return c, nil
}

// retentionMs is the PEXPIRE argument for retained keys; 0 means none.
func (c Config) retentionMs() int64 {
	if c.Retention < 0 {
		return 0
	}
	return c.Retention.Milliseconds()
}

// base is what every concern shares.
type base struct {
	cfg   Config
	rdb   redis.UniversalClient
	clock engine.Clock
	k     keys
	// versions is the highest version read of each replay
	// (replay_version.go).
	versions highWater
	// counts is the highest count seen of each of the taps' records
	// (returns_floor.go).
	counts countMarks
	// tallies is the highest tally read or written of each replay's
	// ledger (ledger_seal.go).
	tallies highWater
	// windowSeqs is the highest write read or written of each sliding
	// window (windows_seal.go).
	windowSeqs highWater
}

func (b *base) now() time.Time { return b.clock.Now() }

// Store is dlqbot's Redis state; it hands out one type per concern.
type Store struct {
	b        *base
	tokens   *Tokens
	ledger   *Ledger
	replays  *Replays
	leases   *Leases
	schedule *Schedule
	workers  *Workers
	jobs     *Jobs
	claims   *Claims
}

// New validates cfg and returns a Store on rdb. A nil clock means the system
// clock. New does not talk to Redis; call Ping for that.
func New(cfg Config, rdb redis.UniversalClient, clock engine.Clock) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("store: nil redis client")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = engine.SystemClock{}
	}
	b := &base{cfg: cfg, rdb: rdb, clock: clock, k: keys{p: cfg.Prefix}}
	return &Store{
		b:        b,
		tokens:   &Tokens{b},
		ledger:   &Ledger{b: b},
		replays:  &Replays{b},
		leases:   &Leases{b},
		schedule: &Schedule{b},
		workers:  &Workers{b},
		jobs:     &Jobs{b: b},
		claims:   &Claims{b},
	}, nil
}

// Claims returns the DLQs' message claims (engine.Claims).
func (s *Store) Claims() *Claims { return s.claims }

// Tokens returns the preview token store (engine.Tokens).
func (s *Store) Tokens() *Tokens { return s.tokens }

// Ledger returns the replay ledger (engine.Ledger).
func (s *Store) Ledger() *Ledger { return s.ledger }

// Replays returns the replay records (engine.Replays).
func (s *Store) Replays() *Replays { return s.replays }

// Leases returns the replay leases (engine.Leases).
func (s *Store) Leases() *Leases { return s.leases }

// Schedule returns the timed-work schedule.
func (s *Store) Schedule() *Schedule { return s.schedule }

// Workers returns the worker registry.
func (s *Store) Workers() *Workers { return s.workers }

// Jobs returns the job queue that hands replays to workers.
func (s *Store) Jobs() *Jobs { return s.jobs }

// Ping checks that Redis answers, for readiness probes; an unreachable Redis
// yields an error wrapping engine.ErrStoreUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.b.rdb.Ping(ctx).Err(); err != nil {
		return fail(err, "ping")
	}
	return nil
}
