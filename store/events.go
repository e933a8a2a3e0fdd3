package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// DefaultEventsMaxLen caps each replay's event log (approximately).
const DefaultEventsMaxLen = 2000

// Events is each replay's log of progress events, so that a follower on
// any replica (the HTTP API's event stream) sees what the replica running
// the replay emitted. It is one stream per replay, P{<replay>}:events,
// field "e" holding the event's JSON, capped at about DefaultEventsMaxLen
// entries and kept as long as replay records are.
type Events struct{ b *base }

// Events returns the replay event logs.
func (s *Store) Events() *Events { return &Events{s.b} }

// Append adds e to its replay's log.
func (ev *Events) Append(ctx context.Context, e engine.Event) error {
	if err := checkTag("replay id", e.Replay.ID); err != nil {
		return fmt.Errorf("store: append event: %w", err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: append event %s: %w", e.Replay.ID, err)
	}
	key := ev.b.k.events(e.Replay.ID)
	_, err = ev.b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: DefaultEventsMaxLen, Approx: true, Values: []any{"e", data}})
		if ms := ev.b.cfg.retentionMs(); ms > 0 {
			p.PExpire(ctx, key, time.Duration(ms)*time.Millisecond)
		}
		return nil
	})
	if err != nil {
		return fail(err, "append event %s", e.Replay.ID)
	}
	return nil
}

// Read returns at most n events of replayID's log after the entry with id
// after ("" for the start), oldest first, with their entry ids (which
// order the log and serve to resume reading after them). An unknown replay
// has an empty log.
func (ev *Events) Read(ctx context.Context, replayID, after string, n int) ([]string, []engine.Event, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return nil, nil, fmt.Errorf("store: read events: %w", err)
	}
	start := "-"
	if after != "" {
		start = "(" + after
	}
	if n <= 0 {
		n = 100
	}
	msgs, err := ev.b.rdb.XRangeN(ctx, ev.b.k.events(replayID), start, "+", int64(n)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fail(err, "read events %s", replayID)
	}
	ids := make([]string, 0, len(msgs))
	out := make([]engine.Event, 0, len(msgs))
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		var e engine.Event
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return ids, out, fmt.Errorf("store: read events %s: entry %s: %w", replayID, m.ID, err)
		}
		ids, out = append(ids, m.ID), append(out, e)
	}
	return ids, out, nil
}
