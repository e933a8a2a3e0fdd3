package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
)

// EventLog is where replay events are kept for the event stream; the
// store's Events implements it.
type EventLog interface {
	// Append adds an event to its replay's log.
	Append(ctx context.Context, e engine.Event) error
	// Read returns at most n events of replayID's log after the entry
	// after ("" for the start), oldest first, with their entry ids.
	Read(ctx context.Context, replayID, after string, n int) ([]string, []engine.Event, error)
}

// RecordEvents returns a Notifier that appends every replay event to log,
// so that event streams on any replica can follow the replay. A write
// waits at most a second; a failure is logged and the event dropped from
// the stream (Slack, the activity channel and metrics are not affected).
func RecordEvents(log EventLog, l zerolog.Logger) engine.Notifier {
	return engine.NotifierFunc(func(ctx context.Context, e engine.Event) {
		if e.Replay.ID == "" {
			return
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := log.Append(wctx, e); err != nil {
			l.Warn().Err(err).Str("replay_id", e.Replay.ID).Str("event", string(e.Kind)).Msg("replay event not logged for the API's event stream")
		}
	})
}

// finalEvent reports whether e ends a replay for good (nothing can resume
// it): the event stream closes after it.
func finalEvent(e engine.Event) bool {
	switch e.Kind {
	case engine.EventFinished, engine.EventCancelled, engine.EventInterrupted:
		return true
	}
	return false
}

// serveEvents streams a replay's events as server-sent events: first an
// event "replay" with the record as it is now, then every logged event
// (id: the log entry's id; event: the kind; data: the event's JSON), from
// the start of the log or after Last-Event-ID, until the replay ends (an
// event "end" follows its final event) or the client goes away.
// finalEventWait is how long a stream whose replay's record is already
// final keeps reading the log for its final event before it ends without
// it: the record is written before the event is logged, and under load the
// log's write came more than a poll later (the stream then ended after
// "step_started", without "cancelled").
const finalEventWait = 5 * time.Second

// serveEvents serves the stream (see above). With record (the API's
// route) opening it is an operation of its own in the audit trail
// (ops.Follow); the dashboard's page, which opens one per view, only
// reads.
func (h *handler) serveEvents(w http.ResponseWriter, r *http.Request, c Caller, record bool) (int, *Error) {
	s := h.s
	id := r.PathValue("id")
	open := s.ops.Replay
	if record {
		open = s.ops.Follow
	}
	rep, err := open(r.Context(), c, id)
	if err != nil {
		return 0, asError(err, id)
	}
	if s.d.Events == nil {
		return 0, newError(http.StatusNotImplemented, CodeUnavailable, "This dlqbot keeps no event log, so replays cannot be followed here; poll GET /api/v1/replays/%s instead.", id)
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return 0, newError(http.StatusInternalServerError, CodeInternal, "This server cannot stream responses.")
	}
	// The server's write timeout bounds ordinary answers; a stream lasts
	// as long as the replay, so it lifts the deadline for itself.
	if err := http.NewResponseController(w).SetWriteDeadline(time.Time{}); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.log.Warn().Err(err).Str("replay_id", id).Msg("event stream: cannot lift the write deadline")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(id, kind string, v any) bool {
		data, _ := json.Marshal(v)
		if id != "" {
			if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
				return false
			}
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !write("", "replay", rep) {
		return http.StatusOK, nil
	}
	after := r.Header.Get("Last-Event-ID")
	ctx := r.Context()
	poll := time.NewTicker(s.cfg.EventPoll)
	defer poll.Stop()
	lastWrite, lastStatus := time.Now(), time.Now()
	ended, endedAt := "", time.Time{}
	for {
		ids, evs, err := s.d.Events.Read(ctx, id, after, 100)
		if err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Str("replay_id", id).Msg("event stream: log unreadable")
		}
		for i, e := range evs {
			after = ids[i]
			if !write(ids[i], string(e.Kind), e) {
				return http.StatusOK, nil
			}
			lastWrite = time.Now()
			if finalEvent(e) {
				write("", "end", map[string]string{"replay_id": id, "state": string(e.Replay.State)})
				return http.StatusOK, nil
			}
		}
		if len(evs) == 100 {
			continue
		}
		if len(evs) == 0 && ended != "" && time.Since(endedAt) >= finalEventWait {
			write("", "end", map[string]string{"replay_id": id, "state": ended})
			return http.StatusOK, nil
		}
		if len(evs) == 0 && time.Since(lastStatus) >= 10*s.cfg.EventPoll {
			// A replay that ended without its final event in the log (the
			// log was unreachable then) must not hold the stream open:
			// read the log once more, then end.
			lastStatus = time.Now()
			if cur, err := s.ops.Replay(ctx, c, id); err == nil && cur.State.Terminal() && ended == "" {
				ended, endedAt = string(cur.State), time.Now()
				continue
			}
		}
		if time.Since(lastWrite) >= s.cfg.Heartbeat {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return http.StatusOK, nil
			}
			fl.Flush()
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return http.StatusOK, nil
		case <-poll.C:
		}
	}
}
