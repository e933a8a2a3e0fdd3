package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The writes and checks of the taps' floors (returns_floor.go) for
// Returns.

// batchFloors is what Record's pipeline answered about the counts a batch
// raised: per replay its script's reply, and the DLQ's floor and count.
type batchFloors struct {
	replays  []string
	scripts  []*redis.Cmd
	arrived  int64
	oldFloor *redis.StringCmd
	count    *redis.IntCmd
}

// raiseFloors writes the floors of the counts a batch raised (one
// pipelined round trip; nothing without a key). A count found below its
// floor before the batch is reported, and its new floor says so (taint).
// The DLQ's floor was read before its count was raised, so it cannot
// hold a later batch's count; a DLQ count without a floor is taken as it
// is (counts from before floors), a replay's is not.
func (r *Returns) raiseFloors(ctx context.Context, dlq string, b batchFloors, start int64) error {
	if len(r.b.cfg.SigningKey) == 0 {
		return nil
	}
	now := r.b.now()
	until := int64(0)
	if keep := r.b.cfg.retentionMs(); keep > 0 {
		until = now.UnixMilli() + keep
	}
	sp := r.b.pipeline()
	for i, rid := range b.replays {
		vals, err := b.scripts[i].Slice()
		if err != nil || len(vals) < 9 {
			return fmt.Errorf("record of %s answered %v: %w", rid, vals, err)
		}
		before := tapCount{exists: atoi64(vals[3]) > 0, n: atoi64(vals[1]), log: atoi64(vals[2]), fields: atoi64(vals[3]), base: atoi64(vals[7])}
		after := tapCount{exists: true, n: atoi64(vals[4]), log: atoi64(vals[5]), fields: atoi64(vals[6]), base: before.base}
		raw, _ := vals[8].(string)
		f := r.b.nextFloor(kindReturns, rid, before, after, raw, start, now, until, false)
		r.b.writeFloor(ctx, sp, r.b.k.returnFloor(rid), kindReturns, rid, f)
	}
	if b.count != nil {
		post := b.count.Val()
		before := tapCount{exists: post > b.arrived, n: post - b.arrived, base: -1}
		after := tapCount{exists: true, n: post, base: -1}
		f := r.b.nextFloor(kindArrivals, dlq, before, after, b.oldFloor.Val(), start, now, until, true)
		r.b.writeFloor(ctx, sp, r.b.k.tapFloor(dlq), kindArrivals, dlq, f)
	}
	if len(sp.calls) == 0 {
		return nil
	}
	return sp.Exec(ctx)
}

// nextFloor is the floor of kind and id after a batch took its count from
// before to after, old being the floor stored before the batch (raw). A
// count found lowered is reported and the floor tainted; a tainted floor
// stays tainted.
func (b *base) nextFloor(kind, id string, before, after tapCount, raw string, start int64, now time.Time, until int64, tofu bool) floor {
	old, why := b.checkFloor(kind, id, before, raw, now, tofu)
	mark := kind + "\x00" + id
	if why == "" {
		if seen, ok := b.counts.check(mark, before.n, start, now.UnixMilli(), until); !ok {
			why = fmt.Sprintf("it counted %d before a batch, below the %d this dlqbot read or wrote before (an older copy written back in Redis, or lowered)", before.n, seen)
		}
	}
	f := floor{tapCount: after, at: now.UnixMilli(), taint: old.taint}
	if why != "" && !old.taint {
		_ = b.refuse(kind, id, why+"; its new floor says so, and every read refuses it")
		f.taint = true
	}
	f.n, f.log, f.fields = max(f.n, old.n), max(f.log, old.log), max(f.fields, old.fields)
	b.counts.check(mark, after.n, start, now.UnixMilli(), until)
	return f
}

// beginFloor writes a replay's floor after Begin (with its baseline, and
// a new time for the hash's new time to live), from state: the hash's n,
// the log's length, the hash's length and its baseline.
func (r *Returns) beginFloor(ctx context.Context, replayID string, state []redis.Cmder) error {
	v := make([]int64, len(state))
	for i, c := range state {
		switch c := c.(type) {
		case *redis.StringCmd:
			if n, err := c.Int64(); err == nil {
				v[i] = n
			}
		case *redis.IntCmd:
			v[i] = c.Val()
		}
	}
	f := floor{tapCount: tapCount{exists: true, n: v[0], log: v[1], fields: v[2], base: v[3]}, at: r.b.now().UnixMilli()}
	sp := r.b.pipeline()
	r.b.writeFloor(ctx, sp, r.b.k.returnFloor(replayID), kindReturns, replayID, f)
	return sp.Exec(ctx)
}

// tofuArrivals writes the floor of a DLQ's count found without one at a
// replay's Begin (a count from before floors), unless this process saw a
// higher count.
func (r *Returns) tofuArrivals(ctx context.Context, dlq string, c tapCount, start int64, now time.Time, until int64) error {
	if seen, ok := r.b.counts.check(kindArrivals+"\x00"+dlq, c.n, start, now.UnixMilli(), until); !ok {
		return r.b.refuse(kindArrivals, dlq, fmt.Sprintf("it counts %d and has no floor, below the %d this dlqbot read or wrote before (its floor deleted and its count lowered in Redis)", c.n, seen))
	}
	sp := r.b.pipeline()
	r.b.writeFloor(ctx, sp, r.b.k.tapFloor(dlq), kindArrivals, dlq, floor{tapCount: c, at: now.UnixMilli()})
	if err := sp.Exec(ctx); err != nil {
		return fail(err, "write the floor of tap arrivals of %s", dlq)
	}
	return nil
}

// returnsVerify is what Returned reads besides the record to check it:
// the floor (read first, so it cannot hold a later batch's counts), the
// log's length and the hash's time to live, and when the read began.
type returnsVerify struct {
	floor *redis.StringCmd
	llen  *redis.IntCmd
	ttl   *redis.DurationCmd
	start int64
}

// verifyReturns checks replay id's hash all against its floor and this
// process's memory, and its failure groups and replay counts against its
// total (each event adds one to each).
func (r *Returns) verifyReturns(id string, all map[string]string, v *returnsVerify) error {
	c := tapCount{exists: len(all) > 0, log: v.llen.Val(), fields: int64(len(all)), base: -1}
	var groups, counts int64
	for f, val := range all {
		n, _ := strconv.ParseInt(val, 10, 64)
		switch {
		case f == "n":
			c.n = n
		case f == "base":
			c.base = n
		case strings.HasPrefix(f, "g:"):
			groups += n
		case strings.HasPrefix(f, "r:"):
			counts += n
		}
	}
	now := r.b.now()
	if err := r.b.verifyCount(kindReturns, id, c, v.floor.Val(), v.start, now, expiresAt(now, v.ttl.Val())); err != nil {
		return err
	}
	if groups != c.n || counts != c.n {
		return r.b.refuse(kindReturns, id, fmt.Sprintf("it counts %d returns, but its failure groups add up to %d and its replay counts to %d (changed in Redis)", c.n, groups, counts))
	}
	return nil
}
