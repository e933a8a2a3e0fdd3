package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// desireIfScript records the state an operator asked for, only when the
// replay's state allows it, in one step: the check and the write cannot be
// separated by an owner's transition.
//
//	KEYS[1] the replay hash, KEYS[2] the replay's lease (same slot)
//	ARGV[1] the desired state, ARGV[2] who asked, ARGV[3..] the states the
//	replay may be in
//
// It returns {code, state, desired before, lease held (0/1)}: code 1 when
// recorded, 0 when the replay does not exist, 2 when its state is not one
// of ARGV[3..], 4 when it is running but nobody holds its lease (its owner
// is gone), 3 when a cancel is pending (only a cancel may follow one).
var desireIfScript = redis.NewScript(`
local data = redis.call('HGET', KEYS[1], 'data')
if not data then return {0, '', '', 0} end
local st = cjson.decode(data)['state']
if type(st) ~= 'string' then st = '' end
local cur = redis.call('HGET', KEYS[1], 'desired') or ''
local owned = redis.call('EXISTS', KEYS[2])
local ok = false
for i = 3, #ARGV do
  if st == ARGV[i] then ok = true end
end
if not ok then return {2, st, cur, owned} end
if st == 'running' and owned == 0 then return {4, st, cur, owned} end
if cur == 'cancelled' and ARGV[1] ~= 'cancelled' then return {3, st, cur, owned} end
redis.call('HSET', KEYS[1], 'desired', ARGV[1], 'desired_by', ARGV[2])
return {1, st, cur, owned}
`)

// DesireIf records the desired state want, by who asked, only if the
// replay is in one of the states from, no cancel is pending (a cancel can
// only be followed by another cancel) and, when it is running, an owner
// holds its lease. The check and the write are one atomic step, so a
// resume racing an owner that is pausing sees either the running replay
// (and the owner sees the resume) or the paused one, never neither. The
// result says what the replay's state was; a refusal is not an error.
func (rs *Replays) DesireIf(ctx context.Context, id string, want engine.State, by string, from ...engine.State) (engine.DesireResult, error) {
	if checkTag("replay id", id) != nil {
		return engine.DesireResult{}, fmt.Errorf("store: desire replay %q: %w", id, engine.ErrReplayNotFound)
	}
	if !knownState(want) {
		return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: unknown state %q", id, want)
	}
	args := []any{string(want), by}
	for _, s := range from {
		args = append(args, string(s))
	}
	v, err := desireIfScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(id), rs.b.k.lease(id)}, args...).Slice()
	if err != nil {
		return engine.DesireResult{}, fail(err, "desire replay %s %s", id, want)
	}
	if len(v) != 4 {
		return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: unexpected reply %v", id, v)
	}
	code, _ := v[0].(int64)
	st, _ := v[1].(string)
	cur, _ := v[2].(string)
	owned, _ := v[3].(int64)
	res := engine.DesireResult{State: engine.State(st), Desired: engine.State(cur), Owned: owned == 1}
	switch code {
	case 0:
		return res, fmt.Errorf("store: desire replay %s: %w", id, engine.ErrReplayNotFound)
	case 1:
		res.Recorded = true
	case 2:
		res.Refused = engine.RefusedState
	case 3:
		res.Refused = engine.RefusedCancelling
	default:
		res.Refused = engine.RefusedOwnerGone
	}
	return res, nil
}

// yieldScript is the owner's last write of a run that leaves the replay
// resumable (paused, stopped): it writes the record, sets the desired state
// to what the run became and releases the lease, in one step, unless an
// operator asked meanwhile for one of the states that forbid it.
//
//	KEYS[1] the replay hash, KEYS[2] the replay's lease (same slot)
//	ARGV[1] owner, ARGV[2] epoch, ARGV[3] the replay JSON, ARGV[4]
//	retention in ms (0: keep forever), ARGV[5] the desired state to set,
//	ARGV[6..] desired states that forbid the write
//
// It returns 1 when written, -1 when the lease is not held by owner or the
// epoch moved on, -2 when the desired state forbids it, 0 when the replay
// does not exist.
var yieldScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then return -1 end
if redis.call('HEXISTS', KEYS[1], 'data') == 0 then return 0 end
local cur = redis.call('HGET', KEYS[1], 'desired') or ''
for i = 6, #ARGV do
  if cur == ARGV[i] then return -2 end
end
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'desired', ARGV[5])
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
redis.call('DEL', KEYS[2])
return 1
`)

// Yield writes r as its owner's last word (fenced like Put), records
// desired as the state now desired, and releases the lease, atomically;
// when the desired state is one of unless (an operator asked for something
// else since the owner decided), nothing changes and the error wraps
// engine.ErrDesireChanged. After a Yield, only a new Desire (a resume) makes
// a worker run the replay again.
func (rs *Replays) Yield(ctx context.Context, r engine.Replay, owner string, epoch int64, desired engine.State, unless ...engine.State) error {
	if checkTag("replay id", r.ID) != nil {
		return fmt.Errorf("store: yield replay %q: %w", r.ID, engine.ErrReplayNotFound)
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = rs.b.now()
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: yield replay %s: %w", r.ID, err)
	}
	args := []any{owner, epoch, rs.b.signReplay(r.ID, data), rs.b.cfg.retentionMs(), string(desired)}
	for _, s := range unless {
		args = append(args, string(s))
	}
	n, err := yieldScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(r.ID), rs.b.k.lease(r.ID)}, args...).Int()
	if err != nil {
		return fail(err, "yield replay %s", r.ID)
	}
	switch n {
	case 1:
		return rs.track(ctx, r.ID, r.State)
	case 0:
		return fmt.Errorf("store: yield replay %s: %w", r.ID, engine.ErrReplayNotFound)
	case -2:
		return fmt.Errorf("store: yield replay %s as %s: %w", r.ID, r.State, engine.ErrDesireChanged)
	default:
		return fmt.Errorf("store: yield replay %s as %s at epoch %d: %w", r.ID, owner, epoch, engine.ErrLeaseLost)
	}
}
