package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// Windows counts within sliding time windows shared by every replica
// (ops.Windows): the four-eyes threshold's self-approved messages per
// requester and DLQ, and the scan rate limit per principal and DLQ. With
// a signing key each window is sealed (windows_seal.go).
type Windows struct{ b *base }

// Windows returns the sliding windows (ops.Windows).
func (s *Store) Windows() *Windows { return &Windows{s.b} }

// takeScript adds a take to a window when it fits.
//
//	KEYS[1] the window (zset of "<id>:<n>" scored by unix ms)
//	ARGV[1] n, ARGV[2] limit, ARGV[3] window in ms, ARGV[4] now (unix
//	ms), ARGV[5] the take's id
//
// Takes older than the window are dropped first; members that are not
// takes (a seal, windows_seal.go) count nothing. It returns {1, used, 0}
// when used (the sum of the takes left) + n <= limit, after adding the
// take, else {0, used, ms until the oldest take leaves the window}.
var takeScript = redis.NewScript(`
local n, limit, win, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local used = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local k = string.match(m, ':(%d+)$')
  if k then used = used + tonumber(k) end
end
if used + n > limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local wait = win
  if oldest[2] then wait = tonumber(oldest[2]) + win - now end
  return {0, used, wait}
end
redis.call('ZADD', KEYS[1], now, ARGV[5] .. ':' .. n)
redis.call('PEXPIRE', KEYS[1], win)
return {1, used, 0}
`)

// Take adds n to window name when what was taken within the window stays
// at most limit (see ops.Windows).
func (w *Windows) Take(ctx context.Context, name string, n, limit int, window time.Duration) (engine.WindowTake, error) {
	if n < 0 || window < time.Millisecond {
		return engine.WindowTake{}, fmt.Errorf("store: take %d from window %s of %s: invalid", n, name, window)
	}
	if len(w.b.cfg.SigningKey) > 0 {
		return w.takeSealed(ctx, name, n, limit, window)
	}
	id := engine.NewID("w")
	res, err := takeScript.Run(ctx, w.b.rdb, []string{w.b.k.window(name)}, n, limit, window.Milliseconds(), w.b.now().UnixMilli(), id).Int64Slice()
	if err == nil && len(res) != 3 {
		err = errors.New("unexpected reply")
	}
	if err != nil {
		return engine.WindowTake{}, fail(err, "take from window %s", name)
	}
	t := engine.WindowTake{OK: res[0] == 1, Used: int(res[1]), RetryAfter: time.Duration(res[2]) * time.Millisecond}
	if t.OK {
		t.ID = id + ":" + fmt.Sprint(n)
	}
	return t, nil
}

// Give removes take id (as Take returned it) from window name.
func (w *Windows) Give(ctx context.Context, name, id string) error {
	if len(w.b.cfg.SigningKey) > 0 {
		return w.giveSealed(ctx, name, id)
	}
	if err := w.b.rdb.ZRem(ctx, w.b.k.window(name), id).Err(); err != nil {
		return fail(err, "give back %s to window %s", id, name)
	}
	return nil
}
