package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Leases = (*Leases)(nil)

// acquireScript takes a free lease and bumps the replay's fencing epoch.
//
//	KEYS[1] the replay's lease, KEYS[2] the replay hash (same slot)
//	ARGV[1] owner, ARGV[2] lease TTL in ms
//
// It returns the new epoch (≥ 1), or 0 when the lease is held. The epoch is
// the replay hash's "epoch" field: it only grows, and Put compares it.
var acquireScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
return redis.call('HINCRBY', KEYS[2], 'epoch', 1)
`)

// extendScript renews a lease its owner still holds.
//
//	KEYS[1] the replay's lease
//	ARGV[1] owner, ARGV[2] lease TTL in ms
//
// It returns 1 when renewed, 0 when owner does not hold the lease.
var extendScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript frees a lease its owner still holds.
//
//	KEYS[1] the replay's lease
//	ARGV[1] owner
//
// It returns 1 when freed, 0 when owner does not hold the lease.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// Leases hold replay ownership: a lease key (P{<replay>}:lease,
// SET NX PX) names the owner, and each Acquire bumps the replay's epoch, the
// fencing token Replays.Put checks. It implements engine.Leases.
type Leases struct{ b *base }

// Acquire takes replayID's lease for owner for ttl if it is free and returns
// the new epoch; ok is false (with a nil error) when the lease is held,
// even by owner itself.
func (l *Leases) Acquire(ctx context.Context, replayID, owner string, ttl time.Duration) (int64, bool, error) {
	if err := checkLease(replayID, owner, ttl); err != nil {
		return 0, false, fmt.Errorf("store: acquire lease %s: %w", replayID, err)
	}
	epoch, err := acquireScript.Run(ctx, l.b.rdb,
		[]string{l.b.k.lease(replayID), l.b.k.replay(replayID)}, owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, false, fail(err, "acquire lease %s", replayID)
	}
	return epoch, epoch > 0, nil
}

// Extend renews the lease for ttl if owner still holds it;
// engine.ErrLeaseLost otherwise (held by another, released or expired).
func (l *Leases) Extend(ctx context.Context, replayID, owner string, ttl time.Duration) error {
	if err := checkLease(replayID, owner, ttl); err != nil {
		return fmt.Errorf("store: extend lease %s: %w", replayID, err)
	}
	n, err := extendScript.Run(ctx, l.b.rdb, []string{l.b.k.lease(replayID)}, owner, ttl.Milliseconds()).Int()
	if err != nil {
		return fail(err, "extend lease %s", replayID)
	}
	if n == 0 {
		return fmt.Errorf("store: extend lease %s for %s: %w", replayID, owner, engine.ErrLeaseLost)
	}
	return nil
}

// Release frees the lease if owner holds it. When owner does not (the lease
// expired or was taken over) nothing changes and the error wraps
// engine.ErrLeaseLost, which a caller shutting down may ignore.
func (l *Leases) Release(ctx context.Context, replayID, owner string) error {
	if err := checkLease(replayID, owner, time.Millisecond); err != nil {
		return fmt.Errorf("store: release lease %s: %w", replayID, err)
	}
	n, err := releaseScript.Run(ctx, l.b.rdb, []string{l.b.k.lease(replayID)}, owner).Int()
	if err != nil {
		return fail(err, "release lease %s", replayID)
	}
	if n == 0 {
		return fmt.Errorf("store: release lease %s for %s: %w", replayID, owner, engine.ErrLeaseLost)
	}
	return nil
}

// Owner returns who holds replayID's lease, "" when nobody does (the reaper
// looks for running replays without an owner).
func (l *Leases) Owner(ctx context.Context, replayID string) (string, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return "", fmt.Errorf("store: lease owner of %q: %w", replayID, err)
	}
	owner, err := l.b.rdb.Get(ctx, l.b.k.lease(replayID)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fail(err, "lease owner of %s", replayID)
	}
	return owner, nil
}

func checkLease(replayID, owner string, ttl time.Duration) error {
	if err := checkTag("replay id", replayID); err != nil {
		return err
	}
	if owner == "" {
		return errors.New("empty owner")
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl %s is too short", ttl)
	}
	return nil
}
