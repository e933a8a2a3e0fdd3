package api

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// Defaults for Config.
const (
	DefaultMaxBodyBytes = 64 << 10
	DefaultWorkTimeout  = 10 * time.Minute
	DefaultListSize     = 20
	DefaultMaxList      = 200
	DefaultEventPoll    = 250 * time.Millisecond
	DefaultHeartbeat    = 15 * time.Second
)

// Config configures the API. Zero values mean the documented defaults.
type Config struct {
	// Policy is the permissions file. The HTTP API serves only when it is
	// set (it names the principals); nil turns the HTTP API off. The MCP
	// stdio server may run without one, like the terminal.
	Policy *commands.Policy
	// MaxBodyBytes caps a request body; default 64 KiB.
	MaxBodyBytes int64
	// WorkTimeout bounds one call's work (a preview scan, an approval);
	// default 10 minutes.
	WorkTimeout time.Duration
	// EventPoll is how often an event stream reads the replay's event log;
	// default 250ms.
	EventPoll time.Duration
	// Heartbeat is how often an idle event stream sends a comment so that
	// proxies keep it open; default 15s.
	Heartbeat time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WorkTimeout <= 0 {
		c.WorkTimeout = DefaultWorkTimeout
	}
	if c.EventPoll <= 0 {
		c.EventPoll = DefaultEventPoll
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	return c
}

// Engine is what the API asks of the engine; *engine.Service implements it.
type Engine interface {
	Preview(ctx context.Context, sel engine.Selection, requester string) (*engine.Preview, error)
	Compare(ctx context.Context, token string) (engine.Frozen, []engine.Change, error)
	Approve(ctx context.Context, token, approver string, p engine.Params, confirmed bool) (engine.Approval, error)
	Control(ctx context.Context, id string, a engine.ControlAction, by string) (engine.Replay, error)
	// Enqueue hands an approved replay to the workers.
	Enqueue(ctx context.Context, id string) error
	Status(ctx context.Context, id string) (engine.Replay, error)
	Check(ctx context.Context, replayID, label string) (engine.CheckReport, error)
	Park(ctx context.Context, replayID, by string) (engine.ParkResult, error)
}

// Replays lists replay records; the store's Replays implements it.
type Replays interface {
	List(ctx context.Context, n int) ([]engine.Replay, error)
}

// Tokens reads frozen previews; the store's Tokens implements it.
type Tokens interface {
	Load(ctx context.Context, token string) (engine.Frozen, error)
}

// Slack is the Slack front end, when one is wired in; *bot.Bot implements
// it.
type Slack interface {
	// ShowReplay shows a replay approved outside Slack: its progress
	// message in the preview's thread when the preview was posted in
	// Slack, else in a thread of its own in the API channel (when one is
	// configured), and records where.
	ShowReplay(ctx context.Context, r engine.Replay) error
	// RequestApproval posts a preview made outside Slack in the API
	// channel, with Approve and Discard buttons, for a person to decide;
	// p may be nil (then it is rendered from the frozen preview).
	RequestApproval(ctx context.Context, f engine.Frozen, p *engine.Preview) (channel, ts string, err error)
}

// Deps are the API's collaborators.
type Deps struct {
	Engine  Engine
	Replays Replays
	Tokens  Tokens
	// Events is the replay event log the event stream reads; optional
	// (without it the stream endpoint answers 501).
	Events EventLog
	// Slack shows API-approved replays in Slack; optional.
	Slack Slack
	// Groups tells a Slack user's user groups, for principals mapped to a
	// Slack user when the policy names user groups; optional (then only
	// grants by user id count for them).
	Groups commands.UserGroups
	Log    zerolog.Logger
	// Audit records every operation of the Service (audit/); optional.
	Audit audit.Recorder
	// AuditLog reads the trail for GET /api/v1/audit; optional (501
	// without).
	AuditLog audit.Reader
	// Now tells the time; nil means time.Now.
	Now func() time.Time
}

// Service holds the operations every program front end shares (the HTTP
// API and the MCP tools). It is safe for concurrent use.
type Service struct {
	cfg      Config
	d        Deps
	log      zerolog.Logger
	previews *previewCache
}

// New validates cfg and deps and returns a Service.
func New(cfg Config, d Deps) (*Service, error) {
	if d.Engine == nil || d.Replays == nil || d.Tokens == nil {
		return nil, errors.New("api: new: engine, replays and tokens are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{cfg: cfg.withDefaults(), d: d, log: d.Log.With().Str("component", "api").Logger(), previews: newPreviewCache()}, nil
}

// Policy returns the permissions policy (nil when access control is off).
func (s *Service) Policy() *commands.Policy { return s.cfg.Policy }

// Caller is who makes a call: the identity recorded as requester,
// approver or actor, the principal's name, and the front end.
type Caller struct {
	// ID is the identity checked by the policy and recorded: "api:<name>",
	// or the Slack user id a principal is mapped to, or (MCP over stdio
	// without a permissions file) "mcp:<os user>".
	ID string
	// Principal is the principal's name ("" when none).
	Principal string
	// Via names the front end: "api" or "mcp".
	Via string
}

// CallerOf returns the Caller a principal makes through front end via.
func CallerOf(p commands.Principal, via string) Caller {
	return Caller{ID: p.ID(), Principal: p.Name, Via: via}
}

// permit runs check with the caller's Slack user groups when the caller
// is a Slack user and the policy names user groups.
func (s *Service) permit(ctx context.Context, c Caller, check func(groups []string) error) error {
	p := s.cfg.Policy
	if p == nil {
		return nil
	}
	var groups []string
	if s.d.Groups != nil && len(p.Groups()) > 0 && !isPrincipalID(c.ID) {
		g, err := s.d.Groups.GroupsOf(ctx, c.ID)
		if err != nil {
			s.log.Warn().Err(err).Str("principal", c.Principal).Msg("user groups lookup failed; only grants by user id count")
		}
		groups = g
	}
	return check(groups)
}

func isPrincipalID(id string) bool { return strings.HasPrefix(id, commands.PrincipalPrefix) }
