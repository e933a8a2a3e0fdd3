package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// DesireIf records the desired state want, by who asked, only if the
// replay is in one of the states from, no cancel is pending (a cancel can
// only be followed by another cancel) and, when it is running, an owner
// holds its lease. The check reads the record and its lease at one
// moment, and the write lands only if neither changed since (compare-and-
// set on the record's version and the lease), so a resume racing an owner
// that is pausing sees either the running replay (and the owner sees the
// resume) or the paused one, never neither. The result says what the
// replay's state was; a refusal is not an error.
func (rs *Replays) DesireIf(ctx context.Context, id string, want engine.State, by string, from ...engine.State) (engine.DesireResult, error) {
	if checkTag("replay id", id) != nil {
		return engine.DesireResult{}, fmt.Errorf("store: desire replay %q: %w", id, engine.ErrReplayNotFound)
	}
	if !knownState(want) {
		return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: unknown state %q", id, want)
	}
	allowed := func(st engine.State) bool {
		for _, s := range from {
			if st == s {
				return true
			}
		}
		return false
	}
	return rs.desire(ctx, id, want, by, func(st, cur engine.State, owned bool) engine.DesireResult {
		res := engine.DesireResult{State: st, Desired: cur, Owned: owned}
		switch {
		case !allowed(st):
			res.Refused = engine.RefusedState
		case st == engine.StateRunning && !owned:
			res.Refused = engine.RefusedOwnerGone
		case cur == engine.StateCancelled && want != engine.StateCancelled:
			res.Refused = engine.RefusedCancelling
		}
		return res
	})
}

// yieldScript is the owner's last write of a run that leaves the replay
// resumable (paused, stopped): it writes the record, sets the desired state
// to what the run became and releases the lease, in one step, unless an
// operator asked meanwhile for anything (the version moved on).
//
//	KEYS[1] the replay hash, KEYS[2] the replay's lease (same slot)
//	ARGV[1] owner, ARGV[2] epoch, ARGV[3] the replay JSON, ARGV[4]
//	retention in ms (0: keep forever), ARGV[5] the desired state to set,
//	ARGV[6] the version read ("" when none), ARGV[7] the new version,
//	ARGV[8] its seal ("" when unsigned)
//
// It returns 1 when written, -1 when the lease is not held by owner or the
// epoch moved on, -3 when the version moved on, 0 when the replay does not
// exist.
var yieldScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then return -1 end
if redis.call('HEXISTS', KEYS[1], 'data') == 0 then return 0 end
if (redis.call('HGET', KEYS[1], 'ver') or '') ~= ARGV[6] then return -3 end
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'desired', ARGV[5], 'ver', ARGV[7])
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'seal', ARGV[8]) else redis.call('HDEL', KEYS[1], 'seal') end
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
	for attempt := 0; attempt < updateAttempts; attempt++ {
		// A missing record is the script's to tell from a lost lease.
		h, _, err := rs.readControl(ctx, r.ID)
		if err != nil {
			return readFail(err, "yield replay %s", r.ID)
		}
		for _, s := range unless {
			if engine.State(h.desired) == s {
				return fmt.Errorf("store: yield replay %s as %s: %w", r.ID, r.State, engine.ErrDesireChanged)
			}
		}
		next := h.ver + 1
		n, err := yieldScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(r.ID), rs.b.k.lease(r.ID)},
			owner, epoch, rs.b.stampReplay(r.ID, next, data), rs.b.cfg.retentionMs(), string(desired),
			h.verArg(), next, rs.b.seal(r.ID, next, string(desired), h.by)).Int()
		if err != nil {
			return fail(err, "yield replay %s", r.ID)
		}
		switch n {
		case 1:
			return rs.track(ctx, r.ID, r.State)
		case 0:
			return fmt.Errorf("store: yield replay %s: %w", r.ID, engine.ErrReplayNotFound)
		case -3:
			continue // someone wrote meanwhile: read their request
		default:
			return fmt.Errorf("store: yield replay %s as %s at epoch %d: %w", r.ID, owner, epoch, engine.ErrLeaseLost)
		}
	}
	return fmt.Errorf("store: yield replay %s: %d attempts lost to concurrent writers", r.ID, updateAttempts)
}
