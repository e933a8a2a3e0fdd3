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
	a.svc.SetNotifier(engine.NotifierFunc(func(_ context.Context, e engine.Event) {
		log.Info().Str("replay_id", e.Replay.ID).Str("event", string(e.Kind)).Str("state", string(e.Replay.State)).Msg(e.Text)
	}))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", a.readyz)
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
	<-ctx.Done()
	log.Info().Msg("shutting down: finishing in-flight copies, releasing leases")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	wg.Wait()
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
