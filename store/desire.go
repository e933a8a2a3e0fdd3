package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// desireScript records the state an operator asked for, if the record
// is still at the version the asker read and its lease is as it saw it.
//
//	KEYS[1] the replay hash, KEYS[2] the replay's lease (same slot)
//	ARGV[1] the version read ("" when none), ARGV[2] the new version,
//	ARGV[3] the replay JSON at the new version, ARGV[4] its seal ("" when
//	unsigned), ARGV[5] the desired state, ARGV[6] who asked, ARGV[7] the
//	lease as seen ("1" held, "0" free, "" either)
//
// It returns 1 when recorded, 0 when the replay does not exist, -3 when
// the version or the lease moved on.
var desireScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'data') == 0 then return 0 end
if (redis.call('HGET', KEYS[1], 'ver') or '') ~= ARGV[1] then return -3 end
if ARGV[7] ~= '' and tostring(redis.call('EXISTS', KEYS[2])) ~= ARGV[7] then return -3 end
redis.call('HSET', KEYS[1], 'data', ARGV[3], 'ver', ARGV[2], 'desired', ARGV[5], 'desired_by', ARGV[6])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'seal', ARGV[4]) else redis.call('HDEL', KEYS[1], 'seal') end
return 1
`)

// Desire records the state an operator asked for (paused, running,
// cancelled, …) in the replay's hash, sealed with the record's next
// version; the replay's owner reads it with Desired between publishes.
func (rs *Replays) Desire(ctx context.Context, id string, s engine.State, by string) error {
	if checkTag("replay id", id) != nil {
		return fmt.Errorf("store: desire replay %q: %w", id, engine.ErrReplayNotFound)
	}
	if !knownState(s) {
		return fmt.Errorf("store: desire replay %s: unknown state %q", id, s)
	}
	_, err := rs.desire(ctx, id, s, by, nil)
	return err
}

// desire records want, by who asked, when decide (nil: always) allows it
// for the replay as read: its state, pending control and lease. The
// record is read and checked, then written at its next version by
// compare-and-set, retried when another writer got in first.
func (rs *Replays) desire(ctx context.Context, id string, want engine.State, by string,
	decide func(st engine.State, desired engine.State, owned bool) engine.DesireResult) (engine.DesireResult, error) {
	rk, lk := rs.b.k.replay(id), rs.b.k.lease(id)
	for attempt := 0; attempt < updateAttempts; attempt++ {
		// The record and its lease in one MULTI: a decision is taken on
		// one moment of both.
		start := rs.b.versions.start()
		var vals *redis.SliceCmd
		var held *redis.IntCmd
		if _, err := rs.b.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			vals = p.HMGet(ctx, rk, replayFields...)
			held = p.Exists(ctx, lk)
			return nil
		}); err != nil {
			return engine.DesireResult{}, fail(err, "desire replay %s %s", id, want)
		}
		stored, h, seal, ok := parseHash(vals.Val())
		if !ok {
			return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: %w", id, engine.ErrReplayNotFound)
		}
		h, err := rs.b.openHash(id, stored, h, seal, start)
		if err != nil {
			return engine.DesireResult{}, err
		}
		owned := held.Val()
		var cur struct {
			State engine.State `json:"state"`
		}
		if err := json.Unmarshal(h.data, &cur); err != nil {
			return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: decode: %w", id, err)
		}
		res := engine.DesireResult{State: cur.State, Desired: engine.State(h.desired), Owned: owned == 1}
		if decide != nil {
			if res = decide(cur.State, engine.State(h.desired), owned == 1); res.Refused != "" {
				return res, nil
			}
		}
		next := h.ver + 1
		n, err := desireScript.Run(ctx, rs.b.rdb, []string{rk, lk}, h.verArg(), next,
			rs.b.stampReplay(id, next, h.data), rs.b.seal(id, next, string(want), by),
			string(want), by, strconv.FormatInt(owned, 10)).Int()
		if err != nil {
			return engine.DesireResult{}, fail(err, "desire replay %s %s", id, want)
		}
		switch n {
		case 1:
			res.Recorded = true
			return res, nil
		case 0:
			return res, fmt.Errorf("store: desire replay %s: %w", id, engine.ErrReplayNotFound)
		}
	}
	return engine.DesireResult{}, fmt.Errorf("store: desire replay %s: %d attempts lost to concurrent writers", id, updateAttempts)
}

// Desired returns the last state asked for with Desire and who asked, ""
// when none; engine.ErrReplayNotFound when the replay does not exist. A
// pending control that fails its seal is refused (ErrSideFieldsChanged),
// never read as "nothing asked".
func (rs *Replays) Desired(ctx context.Context, id string) (engine.State, string, error) {
	if checkTag("replay id", id) != nil {
		return "", "", fmt.Errorf("store: desired state of %q: %w", id, engine.ErrReplayNotFound)
	}
	h, ok, err := rs.readControl(ctx, id)
	if err != nil {
		return "", "", readFail(err, "desired state of %s", id)
	}
	if !ok {
		return "", "", fmt.Errorf("store: desired state of %s: %w", id, engine.ErrReplayNotFound)
	}
	return engine.State(h.desired), h.by, nil
}

// knownState reports whether s is one of the engine's replay states.
func knownState(s engine.State) bool {
	switch s {
	case engine.StateQueued, engine.StateRunning, engine.StatePaused, engine.StateStopped,
		engine.StateCancelled, engine.StateFinished, engine.StateInterrupted:
		return true
	}
	return false
}
