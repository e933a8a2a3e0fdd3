package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// tokenReleaseScript undoes a Consume by one replay id.
//
//	KEYS[1] the token's used key
//	ARGV[1] the replay id that consumed it
//
// It returns 1 when the token was released, 0 when another replay (or
// nobody) holds it.
var tokenReleaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Release undoes Consume by replayID, so the approver can be asked again
// (the world changed since the preview). A token consumed by another
// replay is left alone and reported as used.
func (t *Tokens) Release(ctx context.Context, token, replayID string) error {
	if checkTag("token", token) != nil {
		return fmt.Errorf("store: release preview: %w", engine.ErrTokenNotFound)
	}
	n, err := tokenReleaseScript.Run(ctx, t.b.rdb, []string{t.b.k.tokenUsed(token)}, replayID).Int()
	if err != nil {
		return fail(err, "release preview %s", audit.TokenRef(token))
	}
	if n == 0 {
		return fmt.Errorf("store: release preview %s: %w", audit.TokenRef(token), engine.ErrTokenUsed)
	}
	return nil
}

// Retain keeps a consumed token's preview for at least d more (the replay
// it started reads it until it ends, which may be after the token's TTL).
func (t *Tokens) Retain(ctx context.Context, token string, d time.Duration) error {
	if checkTag("token", token) != nil {
		return fmt.Errorf("store: retain preview: %w", engine.ErrTokenNotFound)
	}
	pipe := t.b.rdb.TxPipeline()
	pipe.ExpireGT(ctx, t.b.k.token(token), d)
	pipe.ExpireGT(ctx, t.b.k.tokenUsed(token), d)
	if err := execPipe(ctx, pipe); err != nil {
		return fail(err, "retain preview %s", audit.TokenRef(token))
	}
	return nil
}
