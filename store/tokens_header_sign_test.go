package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/store/tokencodec"
)

// byteHook counts the bytes of every string reply (GET, GETRANGE) a
// client receives.
type byteHook struct{ n atomic.Int64 }

func (h *byteHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *byteHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *byteHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if c, ok := cmd.(*redis.StringCmd); ok {
			h.n.Add(int64(len(c.Val())))
		}
		return err
	}
}

// TestSignedTokenHeaderIsCheckedAlone: with signing on, LoadHeader reads
// only the header (bytes counted on the Redis client: a bounded prefix of
// a 100,000-item token) and refuses a Redis-side edit of the header's DLQ
// or target; an edited item passes the header check and is refused by
// Load; a token signed before the header had its own MAC (one MAC over
// the whole) is still read by both.
func TestSignedTokenHeaderIsCheckedAlone(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	rdb, err := Open(testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	hook := &byteHook{}
	rdb.AddHook(hook)
	counted, err := New(e.st.b.cfg, rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	tk := counted.Tokens()
	big := benchFrozen(100_000)
	big.Token = ""
	tok, err := tk.Save(e.ctx, big, 0)
	if err != nil {
		t.Fatal(err)
	}
	key := e.st.b.k.token(tok)
	raw, err := e.rdb.Get(e.ctx, key).Bytes()
	if err != nil || !bytes.HasPrefix(raw, tokenSigMagic2) {
		t.Fatalf("stored form %q… (%v): want a header-signed token", raw[:min(len(raw), 8)], err)
	}
	hook.n.Store(0)
	h, err := tk.LoadHeader(e.ctx, tok)
	if err != nil || h.DLQ != "orders.dlq" || h.Distinct != 100_000 || h.Items != nil {
		t.Fatalf("header: %+v %v", h.DLQ, err)
	}
	read := hook.n.Load()
	t.Logf("LoadHeader of a %d-byte signed token read %d bytes", len(raw), read)
	if read > headProbe || read*50 > int64(len(raw)) {
		t.Fatalf("LoadHeader read %d bytes of a %d-byte token: want only a bounded prefix (≤ %d)", read, len(raw), headProbe)
	}

	// A Redis-side edit of the header: the DLQ, then the target.
	for _, ed := range [][2]string{{`"orders.dlq"`, `"attack.dlq"`}, {`"target":"orders"`, `"target":"attack"`}} {
		edited := bytes.Replace(raw, []byte(ed[0]), []byte(ed[1]), 1)
		if bytes.Equal(edited, raw) {
			t.Fatalf("%s is not in the stored header", ed[0])
		}
		if err := e.rdb.Set(e.ctx, key, edited, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if f, err := tk.LoadHeader(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
			t.Fatalf("header edited (%s): %+v %v, want a signature error", ed[1], f.DLQ, err)
		}
		if _, err := tk.Load(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
			t.Fatalf("header edited (%s), Load: %v", ed[1], err)
		}
	}

	// An item edited: its id's bytes in the first record.
	hl := headSigned(raw)
	edited := append([]byte(nil), raw...)
	edited[hl+8] ^= 0xff // the first record's first id byte (after the chunk's n and side)
	if binary.BigEndian.Uint32(raw[hl:]) == 0 {
		t.Fatal("the fixture's first chunk is empty")
	}
	if err := e.rdb.Set(e.ctx, key, edited, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.LoadHeader(e.ctx, tok); err != nil {
		t.Fatalf("an item edited, header only: %v (the header is intact)", err)
	}
	if _, err := tk.Load(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("an item edited, Load: %v, want a signature error", err)
	}
	if len(*refused) != 5 {
		t.Fatalf("%d refusals reported, want 5", len(*refused))
	}

	// A token signed the earlier way (one MAC over the whole).
	small := engine.Frozen{Token: tok, DLQ: "old.dlq", Vhost: "/", Requester: "U1", Total: 1,
		Items: []engine.Item{{ID: "m1", Count: 1, Target: "old", Seq: 0}}}
	val, err := tokencodec.Encode(small)
	if err != nil {
		t.Fatal(err)
	}
	old := append(append(append([]byte(nil), tokenSigMagic...), e.st.b.mac("preview", tok, val)...), val...)
	if err := e.rdb.Set(e.ctx, key, old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if f, err := tk.LoadHeader(e.ctx, tok); err != nil || f.DLQ != "old.dlq" {
		t.Fatalf("a DLQS1 token, header: %+v %v", f.DLQ, err)
	}
	if f, err := tk.Load(e.ctx, tok); err != nil || len(f.Items) != 1 || f.Items[0].Target != "old" {
		t.Fatalf("a DLQS1 token: %+v %v", f, err)
	}
	// An unsigned binary token is refused by the header check too.
	if err := e.rdb.Set(e.ctx, key, val, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.LoadHeader(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("unsigned, header only: %v", err)
	}
}
