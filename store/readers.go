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
// holds messages of the DLQ between steps (held of them, when known), or a
// preview's, approval's or check's read holds them. The DLQ's readers hash
// (Preaders:<dlq>) maps each reader to "<s|c>|<expiry ms>", followed by
// "|<held>" when held > 0; a mark past its expiry counts for nothing, so a
// reader that died leaves none for long.
func (c *Claims) Reading(ctx context.Context, dlq, replay string, seeking bool, held int, ttl time.Duration) error {
	kind := "c"
	if seeking {
		kind = "s"
	}
	v := kind + "|" + strconv.FormatInt(c.b.now().Add(ttl).UnixMilli(), 10)
	if held > 0 {
		v += "|" + strconv.Itoa(held)
	}
	key := c.b.k.readers(dlq)
	_, err := c.b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, replay, v)
		p.Expire(ctx, key, readersTTL)
		return nil
	})
	if err != nil {
		return fail(err, "mark %s reading %s", replay, dlq)
	}
	return nil
}

// parseMark reads a readers hash value: its kind ("s", "c", or "d" for an
// ended mark), its expiry (an ended mark's end) and what it holds.
func parseMark(v string) (kind string, ms int64, held int, ok bool) {
	f := strings.SplitN(v, "|", 3)
	if len(f) < 2 {
		return "", 0, 0, false
	}
	ms, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", 0, 0, false
	}
	if len(f) == 3 {
		held, _ = strconv.Atoi(f[2])
	}
	return f[0], ms, held, true
}

// DoneReading ends replay's mark on dlq (engine.Claims): it becomes
// "d|<now ms>", which no longer counts as reading but tells ReadSince
// that replay read until now.
func (c *Claims) DoneReading(ctx context.Context, dlq, replay string) error {
	if err := c.b.rdb.HSet(ctx, c.b.k.readers(dlq), replay, "d|"+strconv.FormatInt(c.b.now().UnixMilli(), 10)).Err(); err != nil {
		return fail(err, "unmark %s reading %s", replay, dlq)
	}
	return nil
}

// doneKept is how long an ended mark stays for ReadSince: longer than any
// read a step makes; marked deletes older ones as it passes.
const doneKept = time.Hour

// ReadSince lists the replays other than replay that read dlq at any
// moment since (engine.Claims): a mark current then or later, one that
// lapsed since, or one ended since.
func (c *Claims) ReadSince(ctx context.Context, dlq, replay string, since time.Time) ([]string, error) {
	all, err := c.b.rdb.HGetAll(ctx, c.b.k.readers(dlq)).Result()
	if err != nil {
		return nil, fail(err, "readers of %s since %s", dlq, since)
	}
	var out []string
	for id, v := range all {
		_, until, _, ok := parseMark(v) // a mark's expiry, an ended mark's end
		if ok && id != replay && until >= since.UnixMilli() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
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
	var out, stale []string
	for id, v := range all {
		kind, exp, _, ok := parseMark(v)
		if kind == "d" && ok && exp < now-doneKept.Milliseconds() {
			stale = append(stale, id)
		}
		if !ok || kind == "d" || exp <= now || id == replay || only != "" && kind != only {
			continue
		}
		out = append(out, id)
	}
	if len(stale) > 0 {
		// Best effort: an ended mark kept longer only costs its bytes.
		_ = c.b.rdb.HDel(ctx, c.b.k.readers(dlq), stale...).Err()
	}
	slices.Sort(out)
	return out, nil
}

// Holding returns, per reader with an unexpired mark on dlq that said how
// many messages it holds, that count (engine.Claims).
func (c *Claims) Holding(ctx context.Context, dlq string) (map[string]int, error) {
	all, err := c.b.rdb.HGetAll(ctx, c.b.k.readers(dlq)).Result()
	if err != nil {
		return nil, fail(err, "readers of %s", dlq)
	}
	now := c.b.now().UnixMilli()
	out := map[string]int{}
	for id, v := range all {
		if kind, exp, held, ok := parseMark(v); ok && kind != "d" && exp > now && held > 0 {
			out[id] = held
		}
	}
	return out, nil
}
