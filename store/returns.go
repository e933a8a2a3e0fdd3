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
//	KEYS[1] the replay's returns hash, KEYS[2] its return log
//	ARGV[1] retention in ms (0: none), ARGV[2] the log's length cap,
//	then per event: id, group, x-replay-count, redelivered ("1"/"0"), event JSON
//
// A redelivered event whose id is already recorded is skipped: its tap
// message was recorded before and its ack was lost.
var recordScript = redis.NewScript(`
local h, l, keep, maxlog = KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2])
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
return n
`)

// Record stores one batch drained from dlq's tap. It is one pipelined
// round trip: one script per replay in the batch, called by SHA, plus the
// DLQ's arrival counter. A pipeline is not a transaction: a failed call may
// have recorded part of the batch (the tap gives the batch back, and redelivered
// events already recorded are not counted again).
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
	sp := r.b.pipeline()
	pipe := sp.pipe
	for _, rid := range order {
		args := append([]any{keep, maxReturnLog}, byReplay[rid]...)
		sp.Script(ctx, recordScript, []string{r.b.k.returns(rid), r.b.k.returnLog(rid)}, args...)
	}
	if arrived > 0 {
		key := r.b.k.tapArrived(dlq)
		pipe.IncrBy(ctx, key, int64(arrived))
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
		}
	}
	if err := sp.Exec(ctx); err != nil {
		return fail(err, "record returns from %s", dlq)
	}
	return nil
}

// Begin sets replayID's baseline (dlq's arrival count now) unless one is
// set already.
func (r *Returns) Begin(ctx context.Context, replayID, dlq string) error {
	if err := checkTag("replay id", replayID); err != nil {
		return fmt.Errorf("store: begin returns: %w", err)
	}
	n, err := r.Arrived(ctx, dlq)
	if err != nil {
		return err
	}
	key := r.b.k.returns(replayID)
	pipe := r.b.rdb.Pipeline()
	pipe.HSetNX(ctx, key, "base", n)
	if keep := r.b.cfg.retentionMs(); keep > 0 {
		pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
	}
	if err := execPipe(ctx, pipe); err != nil {
		return fail(err, "begin returns of %s", replayID)
	}
	return nil
}

// Arrived is how many messages dlq's tap has recorded in all.
func (r *Returns) Arrived(ctx context.Context, dlq string) (int64, error) {
	n, err := r.b.rdb.Get(ctx, r.b.k.tapArrived(dlq)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fail(err, "tap arrivals of %s", dlq)
	}
	return n, nil
}

// Returned reads replayID's record, with the logged events from index from.
func (r *Returns) Returned(ctx context.Context, replayID string, from int) (engine.ReturnRecord, error) {
	rec := engine.ReturnRecord{ReplayCounts: map[int]int{}, IDs: map[string]int{}}
	if err := checkTag("replay id", replayID); err != nil {
		return rec, fmt.Errorf("store: returns: %w", err)
	}
	pipe := r.b.rdb.Pipeline()
	all := pipe.HGetAll(ctx, r.b.k.returns(replayID))
	var logCmd *redis.StringSliceCmd
	if from >= 0 {
		logCmd = pipe.LRange(ctx, r.b.k.returnLog(replayID), int64(from), -1)
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
