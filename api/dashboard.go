package api

import (
	"context"
	"net/http"

	"github.com/stroma/dlqbot/engine"
)

// What the dashboard asks of the Service beyond the API's own calls: the
// event log, streamed as the API streams it, and the HTTP status of a
// refusal. Every decision in them is an operation's (package ops).

// HTTPStatus is the error's HTTP status, for front ends that render it.
func (e *Error) HTTPStatus() int { return e.Status }

// ReplayEvents returns the replay's logged events so far (at most 2,000),
// oldest first, with their log ids; the caller needs `read` on its DLQ
// (ops.Ops.Replay decides).
func (s *Service) ReplayEvents(ctx context.Context, c Caller, id string) ([]string, []engine.Event, error) {
	if _, err := s.Replay(ctx, c, id); err != nil {
		return nil, nil, err
	}
	if s.d.Events == nil {
		return nil, nil, nil
	}
	var ids []string
	var evs []engine.Event
	after := ""
	for len(ids) < 2000 {
		i, e, err := s.d.Events.Read(ctx, id, after, 500)
		if err != nil {
			return ids, evs, asError(err, id)
		}
		ids, evs = append(ids, i...), append(evs, e...)
		if len(i) < 500 {
			break
		}
		after = i[len(i)-1]
	}
	return ids, evs, nil
}

// ServeEvents streams the replay's events to c as GET
// /api/v1/replays/{id}/events does, from after the log id after (a
// Last-Event-ID header wins), writing a refusal as a JSON error; the
// caller needs `read` on its DLQ (ops.Ops.Replay decides).
func (s *Service) ServeEvents(w http.ResponseWriter, r *http.Request, c Caller, id, after string) {
	r.SetPathValue("id", id)
	if r.Header.Get("Last-Event-ID") == "" && after != "" {
		r.Header.Set("Last-Event-ID", after)
	}
	if _, err := (&handler{s: s}).serveEvents(w, r, c, false); err != nil {
		writeJSON(w, err.Status, err)
	}
}

// MayControl reports whether the policy lets c pause, resume or cancel
// (verb) the replay r (ops.Ops.MayControl); it changes nothing.
func (s *Service) MayControl(ctx context.Context, c Caller, verb string, r engine.Replay) bool {
	action, ok := engine.ParseControlAction(verb)
	return ok && s.ops.MayControl(ctx, c, action, r)
}

// ErrorOf words err, as an operation of the Service returned it or as
// package ops did, as the API's *Error (an HTTP status and a stable code),
// for front ends that call the operations themselves (the dashboard).
func ErrorOf(err error, subject string) *Error { return asError(err, subject) }
