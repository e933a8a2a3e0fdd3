package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// desireScript records the state an operator asked for.
//
//	KEYS[1] the replay hash
//	ARGV[1] the desired state, ARGV[2] who asked
//
// It returns 1 when recorded, 0 when the replay does not exist.
var desireScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], 'data') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'desired', ARGV[1], 'desired_by', ARGV[2])
return 1
`)

// Desire records the state an operator asked for (paused, running,
// cancelled, …) in the replay's hash; the replay's owner reads it with
// Desired between publishes.
func (rs *Replays) Desire(ctx context.Context, id string, s engine.State, by string) error {
	if checkTag("replay id", id) != nil {
		return fmt.Errorf("store: desire replay %q: %w", id, engine.ErrReplayNotFound)
	}
	if !knownState(s) {
		return fmt.Errorf("store: desire replay %s: unknown state %q", id, s)
	}
	n, err := desireScript.Run(ctx, rs.b.rdb, []string{rs.b.k.replay(id)}, string(s), by).Int()
	if err != nil {
		return fail(err, "desire replay %s %s", id, s)
	}
	if n == 0 {
		return fmt.Errorf("store: desire replay %s: %w", id, engine.ErrReplayNotFound)
	}
	return nil
}

// Desired returns the last state asked for with Desire and who asked, ""
// when none; engine.ErrReplayNotFound when the replay does not exist.
func (rs *Replays) Desired(ctx context.Context, id string) (engine.State, string, error) {
	if checkTag("replay id", id) != nil {
		return "", "", fmt.Errorf("store: desired state of %q: %w", id, engine.ErrReplayNotFound)
	}
	key := rs.b.k.replay(id)
	pipe := rs.b.rdb.Pipeline()
	exists := pipe.HExists(ctx, key, fieldData)
	desired := pipe.HMGet(ctx, key, fieldDesired, "desired_by")
	if err := execPipe(ctx, pipe); err != nil {
		return "", "", fail(err, "desired state of %s", id)
	}
	if !exists.Val() {
		return "", "", fmt.Errorf("store: desired state of %s: %w", id, engine.ErrReplayNotFound)
	}
	v := desired.Val()
	s, _ := v[0].(string)
	by, _ := v[1].(string)
	return engine.State(s), by, nil
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
