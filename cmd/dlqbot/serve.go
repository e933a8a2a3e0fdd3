package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/metrics"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// The store implements the Slack front end's ports.
var (
	_ bot.SlackRefs    = (*store.SlackRefs)(nil)
	_ bot.SeenRequests = (*store.SlackRequests)(nil)
)

// serve runs, until ctx ends: a replay worker, the reaper that reports
// replays whose owner died, the DLQ watch, and the HTTP server (health, readiness and the
// Slack endpoints when Slack is configured). Every replica runs the same
// parts against one Redis.
func serve(ctx context.Context, cfg config, stderr io.Writer) error {
	err := func() error {
		a, err := openApp(cfg, stderr)
		if err != nil {
			return err
		}
		defer a.Close()
		// newReplica refuses Slack without a policy unless
		// DLQBOT_ACCESS=open (closedByDefault); then serve needs a
		// signing key unless DLQBOT_ACCESS=open (checkSigning).
		r, err := a.newReplica()
		if err != nil {
			return err
		}
		if err := checkSigning(cfg, a.signed, a.log); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return failed(fmt.Errorf("listen on %s (DLQBOT_HTTP_ADDR): %w", cfg.HTTPAddr, err))
		}
		return r.run(ctx, ln)
	}()
	if err != nil {
		fmt.Fprintln(stderr, "dlqbot serve:", err)
	}
	return err
}

// replica is what one dlqbot process runs: a worker, the reaper, the
// follow-up checks, the DLQ watch (when the policy has a watch: section
// and Slack is configured) and an HTTP server with /healthz, /readyz and,
// when Slack is configured, the bot's endpoints. serve and demo both run one.
type replica struct {
	a   *app
	id  string // the worker's id
	log zerolog.Logger
	bot *bot.Bot // nil without Slack
	mux *http.ServeMux
	// authz is the worker's own check of each replay before it sends
	// (the operations, with this process's policy).
	authz engine.Authorizer
	// watch watches the DLQs the policy's watch: section names; nil
	// without one, or without Slack to post its alerts.
	watch *ops.Watcher
}

// newReplica builds the replica's parts from a.cfg: the engine's notifiers
// (the log, the metrics, the API's event record and the Slack notifier, see
// newSlackNotifier), then the engine, the Slack bot on it and the HTTP
// routes. It starts nothing.
func (a *app) newReplica() (*replica, error) {
	r := &replica{a: a, id: engine.NewID("w_"), mux: http.NewServeMux()}
	r.log = a.log.With().Str("worker", r.id).Logger()
	policy, err := a.loadPolicy()
	if err != nil {
		return nil, err
	}
	if err := closedByDefault(a.cfg, policy); err != nil {
		return nil, err
	}
	a.log = r.log
	logEvents := engine.NotifierFunc(func(_ context.Context, e engine.Event) {
		r.log.Info().Str("replay_id", e.Replay.ID).Str("event", string(e.Kind)).Str("state", string(e.Replay.State)).Msg(e.Text)
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = metrics.New(reg)
	if a.refused != nil {
		a.refused.Store(a.metrics)
	}
	notifiers := engine.Notifiers{logEvents, a.metrics, api.RecordEvents(a.store.Events(), r.log)}
	slack, err := newSlackNotifier(a.cfg, a.store, a.metrics, r.log)
	if err != nil {
		return nil, err
	}
	if slack != nil {
		notifiers = append(notifiers, slack)
	}
	if err := a.newEngine(notifiers, a.metrics, true); err != nil {
		return nil, err
	}
	var groups commands.UserGroups
	if slack != nil {
		groups = slack.UserGroups()
	}
	o, err := a.newOps(policy, groups)
	if err != nil {
		return nil, err
	}
	b, err := newSlackBot(a.cfg, a, slack, o, r.log)
	if err != nil {
		return nil, err
	}
	r.bot, r.authz = b, o
	if b != nil {
		o.SetAsker(b)
	}
	if policy != nil && len(policy.Watch) > 0 && slack != nil {
		if r.watch, err = o.NewWatcher(ops.WatchConfig{Rules: policy.Watch},
			ops.WatchDeps{Depths: a.broker, Alerts: a.store.Alerts(), Poster: slack, Observer: a.metrics}); err != nil {
			return nil, err
		}
		if b != nil {
			b.SetSnoozer(r.watch)
		}
	}
	r.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	r.mux.HandleFunc("GET /readyz", a.readyz)
	r.mux.Handle("GET /metrics", a.metrics.Handler())
	if b != nil && a.cfg.SlackSigningSecret != "" {
		r.mux.Handle("/slack/", b.Handler())
	}
	if err := r.mountAPI(o, b); err != nil {
		return nil, err
	}
	return r, nil
}

// run serves HTTP on ln and runs the worker, the reaper, the follow-ups
// and Socket Mode (when configured) until ctx ends; then it finishes the
// copies in flight, releases the leases and delivers the last events to
// Slack.
func (r *replica) run(ctx context.Context, ln net.Listener) error {
	a, log := r.a, r.log
	srv := newHTTPServer(r.mux, httpTimeouts{})
	log.Info().Str("addr", ln.Addr().String()).Msg("dlqbot serving")
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("http server")
		}
	}()
	go func() {
		defer wg.Done()
		if err := a.svc.Work(ctx, engine.WorkerConfig{ID: r.id, Authorizer: r.authz}); err != nil {
			log.Error().Err(err).Msg("worker")
		}
		// Withdraw so terminal replays stop handing work to this process.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = a.store.Workers().Withdraw(wctx, r.id)
	}()
	go func() {
		defer wg.Done()
		a.svc.Reap(ctx, 0)
	}()
	go func() {
		defer wg.Done()
		a.svc.FollowUps(ctx, 0)
	}()
	if r.watch != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.watch.Run(ctx)
		}()
	}
	if r.bot != nil && a.cfg.SlackAppToken != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.bot.RunSocketMode(ctx); err != nil {
				log.Error().Err(err).Msg("slack socket mode stopped")
			}
		}()
	}
	<-ctx.Done()
	log.Info().Msg("shutting down: finishing in-flight copies, releasing leases")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
	if r.bot != nil {
		// The workers have stopped: deliver their last events to Slack.
		bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer bcancel()
		if err := r.bot.Shutdown(bctx); err != nil {
			log.Warn().Err(err).Msg("slack")
		}
	}
	log.Info().Msg("stopped")
	return nil
}

// readyz answers 200 when RabbitMQ and Redis are both reachable.
func (a *app) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var down []string
	id := engine.NewID("req_")
	if err := a.store.Ping(ctx); err != nil {
		down = append(down, "redis")
		a.log.Warn().Err(err).Str("request_id", id).Msg("readyz: redis does not answer")
	}
	if err := a.broker.Ping(ctx); err != nil {
		down = append(down, "rabbitmq")
		a.log.Warn().Err(err).Str("request_id", id).Msg("readyz: rabbitmq does not answer")
	}
	if len(down) > 0 {
		// Who may reach /readyz learns what is down, never why: the
		// errors name hosts and accounts, and go to the log.
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, d := range down {
			fmt.Fprintf(w, "%s: not reachable\n", d)
		}
		fmt.Fprintf(w, "why is in dlqbot's log under request id %s\n", id)
		return
	}
	fmt.Fprintln(w, "ready")
}

// newSlackNotifier builds the Slack notifier, which posts the progress of
// the replays this replica runs, when SLACK_BOT_TOKEN is set. Without any
// Slack variable it returns nil, and serve runs the worker, the reaper and
// /healthz, /readyz only.
func newSlackNotifier(cfg config, st *store.Store, o bot.Observer, log zerolog.Logger) (*bot.Notifier, error) {
	if cfg.SlackBotToken == "" {
		if cfg.SlackSigningSecret != "" || cfg.SlackAppToken != "" {
			return nil, usageError("SLACK_BOT_TOKEN is required with SLACK_SIGNING_SECRET or SLACK_APP_TOKEN")
		}
		log.Info().Msg("slack not configured (no SLACK_BOT_TOKEN): serving without the bot")
		return nil, nil
	}
	n, err := bot.NewNotifier(bot.Config{
		SigningSecret: cfg.SlackSigningSecret, BotToken: cfg.SlackBotToken, AppToken: cfg.SlackAppToken,
		APIURL: cfg.SlackAPIURL, ActivityChannel: cfg.ActivityChannel, APIChannel: cfg.APIChannel,
		TeamID: cfg.SlackTeamID, AppID: cfg.SlackAppID,
		WorkspaceURL: cfg.SlackWorkspaceURL, DashboardURL: cfg.DashboardURL,
	}, bot.NotifierDeps{Replays: st.Replays(), Refs: st.SlackRefs(), Previews: st.Tokens(), Log: log, Observer: o})
	if err != nil {
		return nil, usageError("slack: %w", err)
	}
	return n, nil
}

// newSlackBot builds the Slack bot on n (nil without Slack: no bot): with
// SLACK_SIGNING_SECRET it serves the HTTP endpoints, with SLACK_APP_TOKEN
// Socket Mode; with neither it only posts the progress of the replays this
// replica runs.
func newSlackBot(cfg config, a *app, n *bot.Notifier, o *ops.Ops, log zerolog.Logger) (*bot.Bot, error) {
	if n == nil {
		return nil, nil
	}
	b, err := bot.New(n, bot.Deps{Ops: o, Tokens: a.store.Tokens(), Seen: a.store.SlackRequests()})
	if err != nil {
		return nil, usageError("slack: %w", err)
	}
	log.Info().Bool("http", cfg.SlackSigningSecret != "").Bool("socket_mode", cfg.SlackAppToken != "").
		Str("team_id", cfg.SlackTeamID).Str("app_id", cfg.SlackAppID).
		Bool("access_control", b.AccessControl()).Str("activity_channel", cfg.ActivityChannel).Msg("slack bot ready")
	if cfg.SlackSigningSecret == "" && cfg.SlackAppToken == "" {
		log.Warn().Msg("SLACK_BOT_TOKEN without SLACK_SIGNING_SECRET or SLACK_APP_TOKEN: this replica takes no Slack requests and only posts replay progress")
	}
	return b, nil
}

// errOpenAccess is why serve does not start with Slack and no permissions
// file: the sentence names DLQBOT_ACCESS=open.
const errOpenAccess = "Slack is configured (SLACK_BOT_TOKEN) but there is no permissions file (DLQBOT_PERMISSIONS), so anyone in any channel the bot is in could preview any DLQ and approve its replay alone; name a permissions file, or set DLQBOT_ACCESS=open to run with access control off"

// closedByDefault refuses to serve Slack without a policy unless the
// operator said DLQBOT_ACCESS=open (the demo says it for itself).
func closedByDefault(cfg config, policy *commands.Policy) error {
	if cfg.SlackBotToken != "" && policy == nil && !cfg.AccessOpen {
		return usageError("%s", errOpenAccess)
	}
	return nil
}
