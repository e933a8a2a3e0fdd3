package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/store/tokencodec"
)

// headProbe is how many bytes LoadHeader reads first: the header of a
// binary token (its class table included) is almost always shorter.
const headProbe = 16 << 10

// LoadHeader returns the preview behind token without its items (Items
// nil; Distinct and ItemTargets set); engine.ErrTokenNotFound when it is
// unknown or expired. A binary token's header is read with GETRANGE (one
// read of headProbe bytes, a second when the header is longer), so a
// permission check never transfers or decodes a large preview's items; a
// signed token's header carries its own MAC (signing.go), checked here, so
// signing costs no more reads; a token in the earlier JSON format, or one
// signed by a single MAC over the whole, is read whole through Load.
func (t *Tokens) LoadHeader(ctx context.Context, token string) (engine.Frozen, error) {
	if checkTag("token", token) != nil {
		return engine.Frozen{}, fmt.Errorf("store: load preview header: %w", engine.ErrTokenNotFound)
	}
	key := t.b.k.token(token)
	val, err := t.b.rdb.GetRange(ctx, key, 0, headProbe-1).Bytes()
	if err != nil {
		return engine.Frozen{}, fail(err, "load preview header %s", audit.TokenRef(token))
	}
	if len(val) == 0 {
		// GETRANGE answers "" for a missing key; no token is empty.
		return engine.Frozen{}, fmt.Errorf("store: load preview header %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
	}
	signed := bytes.HasPrefix(val, tokenSigMagic2)
	if tokencodec.IsLegacy(val) || !signed && bytes.HasPrefix(val, tokenSigMagic) {
		// A token signed by one MAC over the whole (before the header had
		// its own) is read whole and checked before its header is
		// believed.
		f, err := t.Load(ctx, token)
		f.Items = nil
		return f, err
	}
	n := tokencodec.HeadLen(val)
	if signed {
		n = headSigned(val)
	} else if err := t.b.unsigned("preview", audit.TokenRef(token)); err != nil {
		return engine.Frozen{}, err // refused unless accepted
	}
	if n > len(val) {
		val, err = t.b.rdb.GetRange(ctx, key, 0, int64(n)-1).Bytes()
		if errors.Is(err, redis.Nil) || err == nil && len(val) == 0 {
			return engine.Frozen{}, fmt.Errorf("store: load preview header %s: %w", audit.TokenRef(token), engine.ErrTokenNotFound)
		}
		if err != nil {
			return engine.Frozen{}, fail(err, "load preview header %s", audit.TokenRef(token))
		}
	}
	if signed {
		if val, err = t.b.openTokenHead(token, audit.TokenRef(token), val); err != nil {
			return engine.Frozen{}, err
		}
	}
	f, err := tokencodec.DecodeHeader(val)
	if err != nil {
		return engine.Frozen{}, fmt.Errorf("store: load preview header %s: %w", audit.TokenRef(token), err)
	}
	return f, nil
}
