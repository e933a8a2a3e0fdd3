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

var _ engine.Replays = (*Replays)(nil)

// Fields of a replay's hash.
const (
	fieldData    = "data"    // the replay as JSON
	fieldEpoch   = "epoch"   // fencing epoch of the last lease Acquire
	fieldDesired = "desired" // state an operator asked for
)

// updateAttempts bounds the optimistic-locking retries of Update.
const updateAttempts = 50

// createScript stores a new replay unless its id is taken, at version 1.
//
//	KEYS[1] the replay hash
//	ARGV[1] the replay JSON, ARGV[2] retention in ms (0: keep forever),
//	ARGV[3] its seal ("" when unsigned)
//
// It returns 1 when created, 0 when the replay already exists.
var createScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], 'data', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'ver', '1')
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'seal', ARGV[3]) end
if tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
`)

// putScript overwrites a replay if the writer still owns it (the fence)
// and the record is still at the version the writer read.
//
//	KEYS[1] the replay hash, KEYS[2] the replay's lease (same slot)
//	ARGV[1] owner, ARGV[2] epoch, ARGV[3] the replay JSON,
//	ARGV[4] retention in ms (0: keep forever), ARGV[5] the version read
//	("" when none), ARGV[6] the new version, ARGV[7] its seal ("" when
//	unsigned)
//
// It returns 1 when written, -1 when the lease is not held by owner or the
// replay's epoch is not epoch, -3 when the version moved on, 0 when the
// replay does not exist.
var putScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[2] then return -1 end
if redis.call('HEXISTS', KEYS[1], 'data') == 0 then return 0 end
if (redis.call('HGET', KEYS[1], 'ver') or '') ~= ARGV[5] then return -3 end
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'ver', ARGV[6])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'seal', ARGV[7]) else redis.call('HDEL', KEYS[1], 'seal') end
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
`)

// Replays stores replay records (P{<replay>}:replay) and the index of all
// replays by creation time. It implements engine.Replays.
//
// The running owner writes with Put, fenced by its lease and epoch; anyone
// else changes a replay with Update or UpdateUnowned (optimistic locking), or
// asks the owner to change it with Desire.
type Replays struct{ b *base }

// Create stores a new replay; ErrReplayExists when the id is taken. It sets
// CreatedAt (and UpdatedAt) from the store's clock when zero.
func (rs *Replays) Create(ctx context.Context, r engine.Replay) error {
	if err := checkTag("replay id", r.ID); err != nil {
		return fmt.Errorf("store: create replay: %w", err)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = rs.b.now()
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: create replay %s: %w", r.ID, err)
	}
	n, err := createScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(r.ID)},
		rs.b.stampReplay(r.ID, 1, data), rs.b.cfg.retentionMs(), rs.b.seal(r.ID, 1, "", "")).Int()
	if err != nil {
		return fail(err, "create replay %s", r.ID)
	}
	if n == 0 {
		return fmt.Errorf("store: create replay %s: %w", r.ID, ErrReplayExists)
	}
	// The index is another slot: it cannot share the script. A replay whose
	// index entry is lost is still readable by id.
	err = rs.b.rdb.ZAdd(ctx, rs.b.k.replays(), redis.Z{
		Score: float64(r.CreatedAt.UnixMilli()), Member: r.ID}).Err()
	if err != nil {
		return fail(err, "create replay %s: index", r.ID)
	}
	return rs.track(ctx, r.ID, r.State)
}

// track keeps the index of replays not in a final state, which the reaper
// reads instead of every replay kept. It is another slot than the replay's
// keys, so it is written after the replay (not atomically): it is an index
// only, and its readers check each replay's state.
func (rs *Replays) track(ctx context.Context, id string, s engine.State) error {
	var err error
	if s.Terminal() {
		err = rs.b.rdb.SRem(ctx, rs.b.k.active(), id).Err()
	} else {
		err = rs.b.rdb.SAdd(ctx, rs.b.k.active(), id).Err()
	}
	if err != nil {
		return fail(err, "replay %s: active index", id)
	}
	return nil
}

// Active returns the ids of replays not in a final state (queued, running,
// paused, stopped), dropping index entries whose record has expired.
func (rs *Replays) Active(ctx context.Context) ([]string, error) {
	ids, err := rs.b.rdb.SMembers(ctx, rs.b.k.active()).Result()
	if err != nil {
		return nil, fail(err, "active replays")
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := rs.b.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		exists[i] = pipe.Exists(ctx, rs.b.k.replay(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fail(err, "active replays")
	}
	live := ids[:0]
	var gone []any
	for i, id := range ids {
		if exists[i].Val() > 0 {
			live = append(live, id)
		} else {
			gone = append(gone, id)
		}
	}
	if len(gone) > 0 {
		_ = rs.b.rdb.SRem(ctx, rs.b.k.active(), gone...).Err()
	}
	return live, nil
}

// Get returns a replay; engine.ErrReplayNotFound when unknown.
func (rs *Replays) Get(ctx context.Context, id string) (engine.Replay, error) {
	if checkTag("replay id", id) != nil {
		return engine.Replay{}, fmt.Errorf("store: get replay %q: %w", id, engine.ErrReplayNotFound)
	}
	h, ok, err := rs.readHash(ctx, rs.b.rdb, id)
	if err != nil {
		return engine.Replay{}, readFail(err, "get replay %s", id)
	}
	if !ok {
		return engine.Replay{}, fmt.Errorf("store: get replay %s: %w", id, engine.ErrReplayNotFound)
	}
	data := h.data
	var r engine.Replay
	if err := json.Unmarshal(data, &r); err != nil {
		return engine.Replay{}, fmt.Errorf("store: get replay %s: decode: %w", id, err)
	}
	return r, nil
}

// Put overwrites r if owner still holds r.ID's lease and epoch is the epoch
// of that lease's Acquire; engine.ErrLeaseLost otherwise (and
// engine.ErrReplayNotFound when the replay does not exist). It sets
// UpdatedAt from the store's clock when zero.
func (rs *Replays) Put(ctx context.Context, r engine.Replay, owner string, epoch int64) error {
	if checkTag("replay id", r.ID) != nil {
		return fmt.Errorf("store: put replay %q: %w", r.ID, engine.ErrReplayNotFound)
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = rs.b.now()
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: put replay %s: %w", r.ID, err)
	}
	for attempt := 0; attempt < updateAttempts; attempt++ {
		// A missing record is the script's to tell from a lost lease.
		h, _, err := rs.readControl(ctx, r.ID)
		if err != nil {
			return readFail(err, "put replay %s", r.ID)
		}
		next := h.ver + 1
		n, err := putScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(r.ID), rs.b.k.lease(r.ID)},
			owner, epoch, rs.b.stampReplay(r.ID, next, data), rs.b.cfg.retentionMs(),
			h.verArg(), next, rs.b.seal(r.ID, next, h.desired, h.by)).Int()
		if err != nil {
			return fail(err, "put replay %s", r.ID)
		}
		switch n {
		case 1:
			return rs.track(ctx, r.ID, r.State)
		case 0:
			return fmt.Errorf("store: put replay %s: %w", r.ID, engine.ErrReplayNotFound)
		case -3:
			continue // an operator's request landed meanwhile: seal it in
		default:
			return fmt.Errorf("store: put replay %s as %s at epoch %d: %w", r.ID, owner, epoch, engine.ErrLeaseLost)
		}
	}
	return fmt.Errorf("store: put replay %s: %d attempts lost to concurrent writers", r.ID, updateAttempts)
}

// Update changes replay id with fn under optimistic locking (WATCH on the
// replay and its lease), retrying when another writer got in first. It is
// for changes by processes that do not own the replay; while an owner holds
// the lease, its next Put overwrites the change, so prefer UpdateUnowned or
// Desire then. fn's error (such as engine.ErrNoChange) aborts the update and
// is returned as is. UpdatedAt is set from the store's clock unless fn set it.
func (rs *Replays) Update(ctx context.Context, id string, fn func(*engine.Replay) error) error {
	return rs.update(ctx, id, false, fn)
}

// UpdateUnowned is Update for a replay nobody owns: it returns ErrLeaseHeld,
// without calling fn, while the replay's lease is held. The reaper uses it to
// mark a replay interrupted exactly once: if an owner acquires the lease or
// writes the replay meanwhile, the update is retried and sees that.
func (rs *Replays) UpdateUnowned(ctx context.Context, id string, fn func(*engine.Replay) error) error {
	return rs.update(ctx, id, true, fn)
}

func (rs *Replays) update(ctx context.Context, id string, unowned bool, fn func(*engine.Replay) error) error {
	var written engine.State // the state the update stored
	if checkTag("replay id", id) != nil {
		return fmt.Errorf("store: update replay %q: %w", id, engine.ErrReplayNotFound)
	}
	rk, lk := rs.b.k.replay(id), rs.b.k.lease(id)
	var fnErr error
	txf := func(tx *redis.Tx) error {
		if unowned {
			n, err := tx.Exists(ctx, lk).Result()
			if err != nil {
				return err
			}
			if n > 0 {
				fnErr = ErrLeaseHeld
				return fnErr
			}
		}
		h, ok, err := rs.readHash(ctx, tx, id)
		if err != nil {
			if errors.Is(err, engine.ErrBadSignature) {
				fnErr = err
			}
			return err
		}
		if !ok {
			fnErr = engine.ErrReplayNotFound
			return fnErr
		}
		data := h.data
		var r engine.Replay
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		before := r.UpdatedAt
		if err := fn(&r); err != nil {
			fnErr = err
			return err
		}
		r.ID = id
		if r.UpdatedAt.Equal(before) {
			r.UpdatedAt = rs.b.now()
		}
		if data, err = json.Marshal(r); err != nil {
			return err
		}
		written = r.State
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			next := h.ver + 1
			p.HSet(ctx, rk, fieldData, rs.b.stampReplay(id, next, data), fieldVersion, next)
			if seal := rs.b.seal(id, next, h.desired, h.by); seal != "" {
				p.HSet(ctx, rk, fieldSeal, seal)
			} else {
				p.HDel(ctx, rk, fieldSeal)
			}
			if ms := rs.b.cfg.retentionMs(); ms > 0 {
				p.PExpire(ctx, rk, time.Duration(ms)*time.Millisecond)
			}
			return nil
		})
		return err
	}
	for attempt := 0; attempt < updateAttempts; attempt++ {
		fnErr = nil
		err := rs.b.rdb.Watch(ctx, txf, rk, lk)
		switch {
		case err == nil:
			return rs.track(ctx, id, written)
		case errors.Is(err, redis.TxFailedErr):
			continue
		case fnErr == engine.ErrReplayNotFound || fnErr == ErrLeaseHeld:
			return fmt.Errorf("store: update replay %s: %w", id, fnErr)
		case fnErr != nil:
			return fnErr
		default:
			return fail(err, "update replay %s", id)
		}
	}
	return fmt.Errorf("store: update replay %s: %d attempts lost to concurrent writers", id, updateAttempts)
}

// List returns replays, newest first, at most n (all of them when n ≤ 0).
// Index entries whose record has expired are dropped. A record that fails
// its check (signature, version, side fields) is reported through
// Config.OnBadSignature and listed as its id alone, Unverifiable.
func (rs *Replays) List(ctx context.Context, n int) ([]engine.Replay, error) {
	ids, err := rs.b.rdb.ZRevRange(ctx, rs.b.k.replays(), 0, int64(n)-1).Result()
	if err != nil {
		return nil, fail(err, "list replays")
	}
	if len(ids) == 0 {
		return nil, nil
	}
	start := rs.b.versions.start()
	pipe := rs.b.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, rs.b.k.replay(id), replayFields...)
	}
	if err := execPipe(ctx, pipe); err != nil {
		return nil, fail(err, "list replays")
	}
	out := make([]engine.Replay, 0, len(ids))
	var stale []any
	for i, cmd := range cmds {
		stored, h, seal, ok := parseHash(cmd.Val())
		if cmd.Err() != nil || !ok {
			stale = append(stale, ids[i])
			continue
		}
		// A record that fails its check is reported (refuse) and listed
		// by its id alone, marked: it never hides the others.
		h, err := rs.b.openHash(ids[i], stored, h, seal, start)
		if err != nil {
			out = append(out, engine.Replay{ID: ids[i], Unverifiable: true})
			continue
		}
		var r engine.Replay
		if err := json.Unmarshal(h.data, &r); err != nil {
			_ = rs.b.refuse("replay", ids[i], "its JSON cannot be read: "+err.Error())
			out = append(out, engine.Replay{ID: ids[i], Unverifiable: true})
			continue
		}
		r.Unverifiable = false
		out = append(out, r)
	}
	if len(stale) > 0 {
		// Best effort: a failure only leaves the stale entries for next time.
		_ = rs.b.rdb.ZRem(ctx, rs.b.k.replays(), stale...).Err()
	}
	return out, nil
}
