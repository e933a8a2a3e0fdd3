package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/store/tokencodec"
)

var _ engine.Tokens = (*Tokens)(nil)

// tokenPrefix starts every preview token.
const tokenPrefix = "p_"

// consumeScript marks a token used by one replay, once.
//
//	KEYS[1] the token key, KEYS[2] the token's used key (same slot)
//	ARGV[1] the consuming replay id
//
// It returns 1 when this call consumed the token, 0 when the token was
// already used, -1 when it is unknown or expired. The used key expires with
// the token.
var consumeScript = redis.NewScript(`
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if ttl > 0 then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ttl)
else
  redis.call('SET', KEYS[2], ARGV[1])
end
return 1
`)

// discardScript deletes an unused token.
//
//	KEYS[1] the token key, KEYS[2] the token's used key (same slot)
//
// It returns 1 when the token was deleted, 0 when it was used (and is kept),
// -1 when it is unknown or expired.
var discardScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('DEL', KEYS[1]) == 1 then return 1 end
return -1
`)

// Tokens stores previews under unguessable tokens. It implements
// engine.Tokens.
type Tokens struct{ b *base }

// newToken returns "p_" and 128 random bits in base64url (24 characters).
func newToken() (string, error) {
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", err
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(buf[:]), nil
}

// Save stores f under a new token for ttl (Config.TokenTTL when ttl ≤ 0) and
// returns the token. It sets f.Token and f.ExpiresAt, and f.CreatedAt when
// zero, from the store's clock; the key expires after ttl in Redis time.
func (t *Tokens) Save(ctx context.Context, f engine.Frozen, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		ttl = t.b.cfg.TokenTTL
	}
	if ttl < time.Millisecond {
		return "", fmt.Errorf("store: save preview: ttl %s is too short", ttl)
	}
	now := t.b.now()
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	f.ExpiresAt = now.Add(ttl)
	for attempt := 0; ; attempt++ {
		tok, err := newToken()
		if err != nil {
			return "", fmt.Errorf("store: save preview: random token: %w", err)
		}
		f.Token = tok
		val, err := tokencodec.Encode(f)
		if err != nil {
			return "", fmt.Errorf("store: save preview: %w", err)
		}
		err = t.b.rdb.SetArgs(ctx, t.b.k.token(tok), t.b.signToken(tok, val), redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
		switch {
		case err == nil:
			return tok, nil
		case errors.Is(err, redis.Nil) && attempt < 3:
			continue // a 128-bit collision: astronomically unlikely
		default:
			return "", fail(err, "save preview")
		}
	}
}

// Load returns the preview behind token; engine.ErrTokenNotFound when it is
// unknown or expired.
func (t *Tokens) Load(ctx context.Context, token string) (engine.Frozen, error) {
	return t.LoadFirst(ctx, token, -1)
}

// LoadFirst is Load with only the first n items decoded, or a few more
// (whole chunks; n < 0: all); Distinct says how many there are. The whole
// token is still read and its signature checked, so the items it gives
// are the ones the preview froze: what it saves is the decode of the rest
// (at 1,000,000 items most of a Load's time).
func (t *Tokens) LoadFirst(ctx context.Context, token string, n int) (engine.Frozen, error) {
	val, err := t.read(ctx, token)
	if err != nil {
		return engine.Frozen{}, err
	}
	f, err := tokencodec.DecodeFirst(val, n)
	if err != nil {
		return engine.Frozen{}, fmt.Errorf("store: load preview %s: %w", audit.TokenRef(token), err)
	}
	return f, nil
}

// LoadColumns is Load with the items column by column (Items nil): what a
// run's plan keeps of them, decoded without an engine.Item for each.
func (t *Tokens) LoadColumns(ctx context.Context, token string) (engine.Frozen, engine.ItemColumns, error) {
	val, err := t.read(ctx, token)
	if err != nil {
		return engine.Frozen{}, engine.ItemColumns{}, err
	}
	f, cols, err := tokencodec.DecodeColumns(val)
	if err != nil {
		return engine.Frozen{}, engine.ItemColumns{}, fmt.Errorf("store: load preview %s: %w", audit.TokenRef(token), err)
	}
	return f, cols, nil
}

// read returns token's stored value, its signature checked and removed
// (openToken); engine.ErrTokenNotFound when it is unknown or expired.
func (t *Tokens) read(ctx context.Context, token string) ([]byte, error) {
	if checkTag("token", token) != nil {
		return nil, fmt.Errorf("store: load preview: %w", engine.ErrTokenNotFound)
	}
	val, err := t.b.rdb.Get(ctx, t.b.k.token(token)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store: load preview %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
	if err != nil {
		return nil, fail(err, "load preview %s", audit.TokenRef(token))
	}
	return t.b.openToken(token, audit.TokenRef(token), val)
}

// Consume marks token used by replayID atomically: of any number of
// concurrent callers exactly one succeeds, the others get
// engine.ErrTokenUsed (engine.ErrTokenNotFound when the token is unknown or
// expired). A used token can still be loaded until it expires.
func (t *Tokens) Consume(ctx context.Context, token, replayID string) error {
	if checkTag("token", token) != nil {
		return fmt.Errorf("store: consume preview: %w", engine.ErrTokenNotFound)
	}
	if replayID == "" {
		return fmt.Errorf("store: consume preview %s: empty replay id", audit.TokenRef(token))
	}
	n, err := consumeScript.Run(ctx, t.b.rdb,
		[]string{t.b.k.token(token), t.b.k.tokenUsed(token)}, replayID).Int()
	if err != nil {
		return fail(err, "consume preview %s", audit.TokenRef(token))
	}
	switch n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("store: consume preview %s: %w", audit.TokenRef(token), engine.ErrTokenUsed)
	default:
		return fmt.Errorf("store: consume preview %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
}

// UsedBy returns the id of the replay that consumed token, "" when it is
// unused; engine.ErrTokenNotFound when the token is unknown or expired.
func (t *Tokens) UsedBy(ctx context.Context, token string) (string, error) {
	if checkTag("token", token) != nil {
		return "", fmt.Errorf("store: preview user: %w", engine.ErrTokenNotFound)
	}
	pipe := t.b.rdb.Pipeline()
	exists := pipe.Exists(ctx, t.b.k.token(token))
	used := pipe.Get(ctx, t.b.k.tokenUsed(token))
	if err := execPipe(ctx, pipe); err != nil {
		return "", fail(err, "preview user %s", audit.TokenRef(token))
	}
	if exists.Val() == 0 {
		return "", fmt.Errorf("store: preview user %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
	return used.Val(), nil
}

// Discard deletes an unused token. A used token is kept and yields
// engine.ErrTokenUsed; an unknown one engine.ErrTokenNotFound.
func (t *Tokens) Discard(ctx context.Context, token string) error {
	if checkTag("token", token) != nil {
		return fmt.Errorf("store: discard preview: %w", engine.ErrTokenNotFound)
	}
	n, err := discardScript.Run(ctx, t.b.rdb,
		[]string{t.b.k.token(token), t.b.k.tokenUsed(token)}).Int()
	if err != nil {
		return fail(err, "discard preview %s", audit.TokenRef(token))
	}
	switch n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("store: discard preview %s: %w", audit.TokenRef(token), engine.ErrTokenUsed)
	default:
		return fmt.Errorf("store: discard preview %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
}
