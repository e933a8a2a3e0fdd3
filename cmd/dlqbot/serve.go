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

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// serve runs, until ctx ends: a replay worker, the reaper that reports
// replays whose owner died, and the HTTP server (health, readiness and the
// Slack endpoints when Slack is configured). Every replica runs the same
// parts against one Redis.
func serve(ctx context.Context, cfg config, stderr io.Writer) error {
	a, err := newApp(cfg, stderr, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	workerID := "w_" + engine.NewReplayID()[2:]
	log := a.log.With().Str("worker", workerID).Logger()
	a.log = log
	logEvents := engine.NotifierFunc(func(_ context.Context, e engine.Event) {
		log.Info().Str("replay_id", e.Replay.ID).Str("event", string(e.Kind)).Str("state", string(e.Replay.State)).Msg(e.Text)
	})
	a.svc.SetNotifier(logEvents)
	slackBot, err := newSlackBot(cfg, a, log)
	if err != nil {
		return err
	}
	if slackBot != nil {
		a.svc.SetNotifier(engine.Notifiers{logEvents, slackBot})
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", a.readyz)
	if slackBot != nil && cfg.SlackSigningSecret != "" {
		mux.Handle("/slack/", slackBot.Handler())
	}
	srv := &http.Server{Addr: cfg.HTTPAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return failed(fmt.Errorf("listen on %s (DLQBOT_HTTP_ADDR): %w", cfg.HTTPAddr, err))
	}
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
		_ = a.svc.Work(ctx, engine.WorkerConfig{ID: workerID}, a.store.Jobs(), a.store.Workers())
		// Withdraw so terminal replays stop handing work to this process.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = a.store.Workers().Withdraw(wctx, workerID)
	}()
	go func() {
		defer wg.Done()
		a.svc.Reap(ctx, 0)
	}()
	go func() {
		defer wg.Done()
		a.svc.FollowUps(ctx, 0)
	}()
	if slackBot != nil && cfg.SlackAppToken != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := slackBot.RunSocketMode(ctx); err != nil {
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
	if slackBot != nil {
		// The workers have stopped: deliver their last events to Slack.
		bctx, bcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer bcancel()
		if err := slackBot.Shutdown(bctx); err != nil {
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
	var problems []string
	if err := a.store.Ping(ctx); err != nil {
		problems = append(problems, "redis: "+err.Error())
	}
	if err := a.broker.Ping(ctx); err != nil {
		problems = append(problems, "rabbitmq: "+err.Error())
	}
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, p := range problems {
			fmt.Fprintln(w, p)
		}
		return
	}
	fmt.Fprintln(w, "ready")
}

// newSlackBot builds the Slack bot when SLACK_BOT_TOKEN is set: with
// SLACK_SIGNING_SECRET it serves the HTTP endpoints, with SLACK_APP_TOKEN
// Socket Mode; with neither it only posts the progress of the replays this
// replica runs. Without any Slack variable it returns nil, and serve runs
// the worker, the reaper and /healthz, /readyz only.
func newSlackBot(cfg config, a *app, log zerolog.Logger) (*bot.Bot, error) {
	if cfg.SlackBotToken == "" {
		if cfg.SlackSigningSecret != "" || cfg.SlackAppToken != "" {
			return nil, usageError("SLACK_BOT_TOKEN is required with SLACK_SIGNING_SECRET or SLACK_APP_TOKEN")
		}
		log.Info().Msg("slack not configured (no SLACK_BOT_TOKEN): serving without the bot")
		return nil, nil
	}
	var policy *commands.Policy
	if cfg.PermissionsFile != "" {
		p, err := commands.LoadPolicy(cfg.PermissionsFile)
		if err != nil {
			return nil, usageError("DLQBOT_PERMISSIONS: %w", err)
		}
		policy = p
	}
	b, err := bot.New(bot.Config{
		SigningSecret: cfg.SlackSigningSecret, BotToken: cfg.SlackBotToken, AppToken: cfg.SlackAppToken,
		APIURL: cfg.SlackAPIURL, ActivityChannel: cfg.ActivityChannel, Policy: policy,
	}, bot.Deps{
		Engine: a.svc, Jobs: a.store.Jobs(), Replays: a.store.Replays(), Tokens: a.store.Tokens(), Log: log,
	})
	if err != nil {
		return nil, usageError("slack: %w", err)
	}
	log.Info().Bool("http", cfg.SlackSigningSecret != "").Bool("socket_mode", cfg.SlackAppToken != "").
		Bool("access_control", policy != nil).Str("activity_channel", cfg.ActivityChannel).Msg("slack bot ready")
	if cfg.SlackSigningSecret == "" && cfg.SlackAppToken == "" {
		log.Warn().Msg("SLACK_BOT_TOKEN without SLACK_SIGNING_SECRET or SLACK_APP_TOKEN: this replica takes no Slack requests and only posts replay progress")
	}
	return b, nil
}
