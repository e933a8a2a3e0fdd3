package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// Event is one server-sent event of a replay's stream: "replay" first
// (Data is the record as it was), then the replay's events by kind
// ("started", "step_passed", … Data is an engine.Event), and "end" when
// the replay ended for good (Data is {replay_id, state}).
type Event struct {
	ID   string
	Kind string
	Data json.RawMessage
}

// Replay returns the replay record e carries ("replay" and the replay's
// events); false for "end" and anything unreadable.
func (e Event) Replay() (engine.Replay, bool) {
	switch e.Kind {
	case "end":
		return engine.Replay{}, false
	case "replay":
		var r engine.Replay
		return r, json.Unmarshal(e.Data, &r) == nil && r.ID != ""
	}
	var ev engine.Event
	return ev.Replay, json.Unmarshal(e.Data, &ev) == nil && ev.Replay.ID != ""
}

// Events follows replay id's event stream (GET /api/v1/replays/{id}/events),
// calling fn for each event until fn returns false, the stream ends (after
// "end"), or ctx ends. A refusal before the stream starts (no `read` on
// the replay's DLQ, no such replay) is an *api.Error.
func (c *Client) Events(ctx context.Context, id string, fn func(Event) bool) error {
	resp, err := c.send(ctx, "GET", "/api/v1/replays/"+url.PathEscape(id)+"/events", nil, nil, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Kind == "" && len(data) == 0 {
				continue // a keep-alive comment's end
			}
			if ev.Kind == "" {
				ev.Kind = "message"
			}
			ev.Data = json.RawMessage(strings.Join(data, "\n"))
			if !fn(ev) || ev.Kind == "end" {
				return nil
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			ev.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			ev.Kind = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("client: events of %s: %w", id, err)
	}
	return nil
}
