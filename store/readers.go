package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// readersTTL bounds how long a DLQ's readers hash outlives its last mark.
const readersTTL = 24 * time.Hour

// Reading marks replay as reading dlq for ttl from now (engine.Claims): with
// seeking, its step looks for picks it has not found; without, its cursor
// holds messages of the DLQ between steps. The DLQ's readers hash
// (Preaders:<dlq>) maps each replay to "<s|c>|<expiry ms>"; a mark past
// its expiry counts for nothing, so a replay that died leaves none for
// long.
func (c *Claims) Reading(ctx context.Context, dlq, replay string, seeking bool, ttl time.Duration) error {
	kind := "c"
	if seeking {
		kind = "s"
	}
	key := c.b.k.readers(dlq)
	_, err := c.b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, replay, kind+"|"+strconv.FormatInt(c.b.now().Add(ttl).UnixMilli(), 10))
		p.Expire(ctx, key, readersTTL)
		return nil
	})
	if err != nil {
		return fail(err, "mark %s reading %s", replay, dlq)
	}
	return nil
}

// DoneReading removes replay's mark on dlq (engine.Claims).
func (c *Claims) DoneReading(ctx context.Context, dlq, replay string) error {
	if err := c.b.rdb.HDel(ctx, c.b.k.readers(dlq), replay).Err(); err != nil {
		return fail(err, "unmark %s reading %s", replay, dlq)
	}
	return nil
}

// Seekers lists the replays other than replay whose steps look for their
// picks on dlq now (engine.Claims).
func (c *Claims) Seekers(ctx context.Context, dlq, replay string) ([]string, error) {
	return c.marked(ctx, dlq, replay, "s")
}

// Cursors lists the replays other than replay whose cursors hold
// messages of dlq between steps (engine.Claims).
func (c *Claims) Cursors(ctx context.Context, dlq, replay string) ([]string, error) {
	return c.marked(ctx, dlq, replay, "c")
}

// marked lists the replays other than replay with an unexpired mark on
// dlq (of kind only, "s" or "c", unless it is empty), sorted.
func (c *Claims) marked(ctx context.Context, dlq, replay, only string) ([]string, error) {
	all, err := c.b.rdb.HGetAll(ctx, c.b.k.readers(dlq)).Result()
	if err != nil {
		return nil, fail(err, "readers of %s", dlq)
	}
	now := c.b.now().UnixMilli()
	var out []string
	for id, v := range all {
		kind, ms, ok := strings.Cut(v, "|")
		exp, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil || exp <= now || id == replay || only != "" && kind != only {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}
