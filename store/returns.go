package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Returns = (*Returns)(nil)

// maxReturnLog is how many returned events a replay's log keeps (the run
// lists at most a few hundred failures; counts stay exact).
const maxReturnLog = 500

// Returns records what the DLQs' taps saw: per replay, each copy that came
// back (counted as events, grouped by failure, by x-replay-count and by
// id), and per DLQ, how many dead letters arrived in all. It implements
// engine.Returns. A replay's keys share its hash tag, so one Lua script
// records a replay's part of a batch atomically; the per-DLQ counter is a
// single key. Reads cost O(returns), never O(DLQ size).
type Returns struct{ b *base }

// Returns returns the tap record (engine.Returns).
func (s *Store) Returns() *Returns { return &Returns{s.b} }

// recordScript adds one replay's returned events.
//
//	KEYS[1] the replay's returns hash, KEYS[2] its return log, KEYS[3] its
//	signed floor (returns_floor.go)
//	ARGV[1] retention in ms (0: none), ARGV[2] the log's length cap,
//	then per event: id, group, x-replay-count, redelivered ("1"/"0"), event JSON
//
// A redelivered event whose id is already recorded is skipped: its tap
// message was recorded before and its ack was lost. It returns how many
// events it counted, the hash's n, the log's length and the hash's field
// count before and after them, the baseline (-1: none) and the floor as
// it stood ("" for none), for the writer to check and raise.
var recordScript = redis.NewScript(`
local h, l, keep, maxlog = KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2])
local n0, l0, f0 = tonumber(redis.call('HGET', h, 'n') or '0'), redis.call('LLEN', l), redis.call('HLEN', h)
local b0 = tonumber(redis.call('HGET', h, 'base') or '-1')
local fl = redis.call('GET', KEYS[3]) or ''
local n = 0
for i = 3, #ARGV, 5 do
  local id, g, rc, redel, ev = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2]), ARGV[i+3], ARGV[i+4]
  local f = 'i:' .. id
  local cur = redis.call('HGET', h, f)
  if redel == '0' or not cur then
    redis.call('HINCRBY', h, 'n', 1)
    redis.call('HINCRBY', h, 'g:' .. g, 1)
    redis.call('HSETNX', h, 'x:' .. g, ev)
    redis.call('HINCRBY', h, 'r:' .. rc, 1)
    if not cur or rc > tonumber(cur) then redis.call('HSET', h, f, rc) end
    if redis.call('LLEN', l) < maxlog then redis.call('RPUSH', l, ev) end
    n = n + 1
  end
end
if keep > 0 then
  redis.call('PEXPIRE', h, keep)
  if redis.call('EXISTS', l) == 1 then redis.call('PEXPIRE', l, keep) end
end
return {n, n0, l0, f0, n0 + n, redis.call('LLEN', l), redis.call('HLEN', h), b0, fl}
`)

// Record stores one batch drained from dlq's tap. It is one pipelined
// round trip: one script per replay in the batch, called by SHA, plus the
// DLQ's arrival counter; with a signing key, a second one writes the
// records' floors (raiseFloors). A pipeline is not a transaction: a failed
// call may have recorded part of the batch (the tap gives the batch back,
// and redelivered events already recorded are not counted again).
func (r *Returns) Record(ctx context.Context, dlq string, returns []engine.ReturnEvent, arrived int) error {
	if dlq == "" {
		return errors.New("store: record returns: empty dlq")
	}
	byReplay := map[string][]any{}
	var order []string
	for _, e := range returns {
		if err := checkTag("replay id", e.ReplayID); err != nil {
			return fmt.Errorf("store: record returns: %w", err)
		}
		if e.ID == "" {
			return fmt.Errorf("store: record returns of %s: empty message id", e.ReplayID)
		}
		ev, err := json.Marshal(e)
		if err != nil {
			return err
		}
		redel := "0"
		if e.Redelivered {
			redel = "1"
		}
		if _, ok := byReplay[e.ReplayID]; !ok {
			order = append(order, e.ReplayID)
		}
		byReplay[e.ReplayID] = append(byReplay[e.ReplayID], e.ID, e.Group, e.ReplayCount, redel, ev)
	}
	keep := r.b.cfg.retentionMs()
	start := r.b.counts.start()
	sp := r.b.pipeline()
	pipe := sp.pipe
	var b batchFloors
	for _, rid := range order {
		args := append([]any{keep, maxReturnLog}, byReplay[rid]...)
		b.replays = append(b.replays, rid)
		b.scripts = append(b.scripts, sp.Script(ctx, recordScript, []string{r.b.k.returns(rid), r.b.k.returnLog(rid), r.b.k.returnFloor(rid)}, args...))
	}
	if arrived > 0 {
		key := r.b.k.tapArrived(dlq)
		b.arrived = int64(arrived)
		b.oldFloor = pipe.Get(ctx, r.b.k.tapFloor(dlq)) // before the count: see raiseFloors
		b.count = pipe.IncrBy(ctx, key, int64(arrived))
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
		}
	}
	if err := sp.Exec(ctx); err != nil {
		return fail(err, "record returns from %s", dlq)
	}
	if err := r.raiseFloors(ctx, dlq, b, start); err != nil {
		return fail(err, "record the floors of returns from %s", dlq)
	}
	return nil
}

// Begin sets replayID's baseline (dlq's arrival count now) unless one is
// set already. With a signing key it first checks both records (a record
// changed in Redis is refused, so a run falls back to re-reading the DLQ)
// and then writes the replay's floor, with its baseline and a new time.
func (r *Returns) Begin(ctx context.Context, replayID, dlq string) error {
	if err := checkTag("replay id", replayID); err != nil {
		return fmt.Errorf("store: begin returns: %w", err)
	}
	n, err := r.arrived(ctx, dlq, true)
	if err != nil {
		return err
	}
	signed := len(r.b.cfg.SigningKey) > 0
	if signed {
		if _, err := r.Returned(ctx, replayID, -1); err != nil {
			return err
		}
	}
	key := r.b.k.returns(replayID)
	pipe := r.b.rdb.Pipeline()
	pipe.HSetNX(ctx, key, "base", n)
	if keep := r.b.cfg.retentionMs(); keep > 0 {
		pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
	}
	var state []redis.Cmder
	if signed { // n, the log's length, the fields, the baseline (beginFloor)
		state = []redis.Cmder{pipe.HGet(ctx, key, "n"), pipe.LLen(ctx, r.b.k.returnLog(replayID)), pipe.HLen(ctx, key), pipe.HGet(ctx, key, "base")}
	}
	if err := execPipe(ctx, pipe); err != nil {
		return fail(err, "begin returns of %s", replayID)
	}
	if signed {
		if err := r.beginFloor(ctx, replayID, state); err != nil {
			return fail(err, "begin returns of %s", replayID)
		}
	}
	return nil
}

// Arrived is how many messages dlq's tap has recorded in all. With a
// signing key a count changed in Redis is refused (returns_floor.go).
func (r *Returns) Arrived(ctx context.Context, dlq string) (int64, error) {
	return r.arrived(ctx, dlq, false)
}

// arrived is Arrived; tofu takes a count without a floor as it is, and
// writes its floor (Begin's, see returns_floor.go).
func (r *Returns) arrived(ctx context.Context, dlq string, tofu bool) (int64, error) {
	start := r.b.counts.start()
	pipe := r.b.rdb.Pipeline()
	fl := pipe.Get(ctx, r.b.k.tapFloor(dlq)) // before the count: see returnsVerify
	cnt := pipe.Get(ctx, r.b.k.tapArrived(dlq))
	ttl := pipe.PTTL(ctx, r.b.k.tapArrived(dlq))
	if err := execPipe(ctx, pipe); err != nil {
		return 0, fail(err, "tap arrivals of %s", dlq)
	}
	n, err := cnt.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fail(err, "tap arrivals of %s", dlq)
	}
	if len(r.b.cfg.SigningKey) == 0 {
		return n, nil
	}
	now := r.b.now()
	c := tapCount{exists: err == nil, n: n, base: -1}
	if tofu && fl.Val() == "" && c.exists {
		return n, r.tofuArrivals(ctx, dlq, c, start, now, expiresAt(now, ttl.Val()))
	}
	if err := r.b.verifyCount(kindArrivals, dlq, c, fl.Val(), start, now, expiresAt(now, ttl.Val())); err != nil {
		return 0, err
	}
	return n, nil
}

// Returned reads replayID's record, with the logged events from index
// from. With a signing key a record changed in Redis is refused
// (verifyReturns).
func (r *Returns) Returned(ctx context.Context, replayID string, from int) (engine.ReturnRecord, error) {
	rec := engine.ReturnRecord{ReplayCounts: map[int]int{}, IDs: map[string]int{}}
	if err := checkTag("replay id", replayID); err != nil {
		return rec, fmt.Errorf("store: returns: %w", err)
	}
	pipe := r.b.rdb.Pipeline()
	var v *returnsVerify
	if len(r.b.cfg.SigningKey) > 0 {
		v = &returnsVerify{start: r.b.counts.start(), floor: pipe.Get(ctx, r.b.k.returnFloor(replayID))}
	}
	all := pipe.HGetAll(ctx, r.b.k.returns(replayID))
	var logCmd *redis.StringSliceCmd
	if from >= 0 {
		logCmd = pipe.LRange(ctx, r.b.k.returnLog(replayID), int64(from), -1)
	}
	if v != nil {
		v.llen, v.ttl = pipe.LLen(ctx, r.b.k.returnLog(replayID)), pipe.PTTL(ctx, r.b.k.returns(replayID))
	}
	if err := execPipe(ctx, pipe); err != nil {
		return rec, fail(err, "returns of %s", replayID)
	}
	groups := map[string]*engine.ReturnGroup{}
	group := func(g string) *engine.ReturnGroup {
		if groups[g] == nil {
			groups[g] = &engine.ReturnGroup{Group: g}
		}
		return groups[g]
	}
	for f, v := range all.Val() {
		switch {
		case f == "n":
			rec.Total, _ = strconv.Atoi(v)
		case f == "base":
			rec.Tapped = true
			rec.Baseline, _ = strconv.ParseInt(v, 10, 64)
		case strings.HasPrefix(f, "g:"):
			group(f[2:]).Count, _ = strconv.Atoi(v)
		case strings.HasPrefix(f, "x:"):
			_ = json.Unmarshal([]byte(v), &group(f[2:]).Example)
		case strings.HasPrefix(f, "r:"):
			rc, err1 := strconv.Atoi(f[2:])
			n, err2 := strconv.Atoi(v)
			if err1 == nil && err2 == nil {
				rec.ReplayCounts[rc] += n
			}
		case strings.HasPrefix(f, "i:"):
			rec.IDs[f[2:]], _ = strconv.Atoi(v)
		}
	}
	for _, g := range groups {
		rec.Groups = append(rec.Groups, *g)
	}
	sort.Slice(rec.Groups, func(i, j int) bool { return rec.Groups[i].Group < rec.Groups[j].Group })
	if logCmd != nil {
		for _, v := range logCmd.Val() {
			var e engine.ReturnEvent
			if json.Unmarshal([]byte(v), &e) == nil {
				rec.Events = append(rec.Events, e)
			}
		}
	}
	if v != nil {
		if err := r.verifyReturns(replayID, all.Val(), v); err != nil {
			return engine.ReturnRecord{ReplayCounts: map[int]int{}, IDs: map[string]int{}}, err
		}
	}
	return rec, nil
}

// AddTap registers dlq as tapped.
func (r *Returns) AddTap(ctx context.Context, dlq string) error {
	if err := r.b.rdb.HSet(ctx, r.b.k.taps(), dlq, r.b.now().UnixMilli()).Err(); err != nil {
		return fail(err, "register tap of %s", dlq)
	}
	return nil
}

// RemoveTap unregisters dlq.
func (r *Returns) RemoveTap(ctx context.Context, dlq string) error {
	if err := r.b.rdb.HDel(ctx, r.b.k.taps(), dlq).Err(); err != nil {
		return fail(err, "unregister tap of %s", dlq)
	}
	return nil
}

// Tapped lists the DLQs registered as tapped.
func (r *Returns) Tapped(ctx context.Context) ([]string, error) {
	qs, err := r.b.rdb.HKeys(ctx, r.b.k.taps()).Result()
	if err != nil {
		return nil, fail(err, "list taps")
	}
	sort.Strings(qs)
	return qs, nil
}
