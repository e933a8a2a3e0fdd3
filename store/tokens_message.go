package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// setMessageScript records where a preview was posted, for as long as its
// token lives.
//
//	KEYS[1] the token key, KEYS[2] the token's message key (same slot)
//	ARGV[1] channel, ARGV[2] message ts
//
// It returns 1 when recorded, 0 when the token is unknown or expired.
var setMessageScript = redis.NewScript(`
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return 0 end
redis.call('HSET', KEYS[2], 'channel', ARGV[1], 'ts', ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
`)

// SetMessage records the Slack message a preview was posted as, so that
// any replica approving its token can thread the replay under it.
func (t *Tokens) SetMessage(ctx context.Context, token, channel, ts string) error {
	if checkTag("token", token) != nil {
		return fmt.Errorf("store: preview message: %w", engine.ErrTokenNotFound)
	}
	n, err := setMessageScript.Run(ctx, t.b.rdb, []string{t.b.k.token(token), t.b.k.tokenMessage(token)}, channel, ts).Int()
	if err != nil {
		return fail(err, "preview message %s", audit.TokenRef(token))
	}
	if n == 0 {
		return fmt.Errorf("store: preview message %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
	return nil
}

// Message returns where a preview was posted ("" when unrecorded).
func (t *Tokens) Message(ctx context.Context, token string) (channel, ts string, err error) {
	if checkTag("token", token) != nil {
		return "", "", fmt.Errorf("store: preview message: %w", engine.ErrTokenNotFound)
	}
	v, err := t.b.rdb.HMGet(ctx, t.b.k.tokenMessage(token), "channel", "ts").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", "", fail(err, "preview message %s", audit.TokenRef(token))
	}
	if len(v) == 2 {
		channel, _ = v[0].(string)
		ts, _ = v[1].(string)
	}
	return channel, ts, nil
}
