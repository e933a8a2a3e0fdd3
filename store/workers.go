package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Registry = (*Workers)(nil)

// announceScript records a worker as alive until now + ttl, by Redis's clock,
// and forgets workers whose announcement expired.
//
//	KEYS[1] the workers sorted set
//	ARGV[1] worker id, ARGV[2] ttl in ms
//
// It returns 1.
var announceScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
`)

// workersScript lists the workers whose announcement has not expired, by
// Redis's clock.
//
//	KEYS[1] the workers sorted set
//
// It returns the worker ids, soonest to expire first.
var workersScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGE', KEYS[1], '(' .. now, '+inf', 'BYSCORE')
`)

// Workers is the registry where worker processes announce themselves
// ("dlqbot replay <token>" hands the replay to running workers, or acts
// as the worker when there are none). It is one sorted set (Pworkers) scored
// by each announcement's expiry, measured by Redis's clock so that processes
// with skewed clocks agree.
type Workers struct{ b *base }

// Announce records workerID as alive for ttl; workers call it again well
// within ttl (for example every ttl/3).
func (w *Workers) Announce(ctx context.Context, workerID string, ttl time.Duration) error {
	if workerID == "" {
		return errors.New("store: announce worker: empty id")
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("store: announce worker %s: ttl %s is too short", workerID, ttl)
	}
	err := announceScript.Run(ctx, w.b.rdb, []string{w.b.k.workers()}, workerID, ttl.Milliseconds()).Err()
	if err != nil {
		return fail(err, "announce worker %s", workerID)
	}
	return nil
}

// Withdraw removes workerID at once, for a clean shutdown.
func (w *Workers) Withdraw(ctx context.Context, workerID string) error {
	if err := w.b.rdb.ZRem(ctx, w.b.k.workers(), workerID).Err(); err != nil {
		return fail(err, "withdraw worker %s", workerID)
	}
	return nil
}

// List returns the ids of the workers whose announcement has not expired.
func (w *Workers) List(ctx context.Context) ([]string, error) {
	ids, err := workersScript.Run(ctx, w.b.rdb, []string{w.b.k.workers()}).StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fail(err, "list workers")
	}
	return ids, nil
}
