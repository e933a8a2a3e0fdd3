package store

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/store/tokencodec"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// signedEnv is a store with a signing key that counts its refusals.
func signedEnv(t *testing.T, mutate ...func(*Config)) (*testEnv, *[]*SignatureError) {
	var mu sync.Mutex
	var refused []*SignatureError
	e := newEnv(t, append([]func(*Config){func(c *Config) {
		c.SigningKey = testKey
		c.OnBadSignature = func(err *SignatureError) { mu.Lock(); refused = append(refused, err); mu.Unlock() }
	}}, mutate...)...)
	return e, &refused
}

// TestSignedPreviewEditedInRedisIsRefused: a frozen preview whose target
// is changed in Redis, or which is copied under another token, is refused
// with ErrBadSignature and reported; the untouched one loads.
func TestSignedPreviewEditedInRedisIsRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	tk := e.st.Tokens()
	f := engine.Frozen{DLQ: "orders.dlq", Vhost: "/", Requester: "U1", Total: 1,
		Items: []engine.Item{{ID: "m1", Count: 1, Target: "orders", Seq: 0}}}
	tok, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tk.Load(e.ctx, tok); err != nil || got.Items[0].Target != "orders" {
		t.Fatalf("untouched: %+v %v", got, err)
	}
	key := e.st.b.k.token(tok)
	raw, err := e.rdb.Get(e.ctx, key).Bytes()
	if err != nil || !bytes.HasPrefix(raw, tokenSigMagic2) {
		t.Fatalf("stored form %q… (%v): want signed", raw[:min(len(raw), 8)], err)
	}
	// Whoever can write Redis sends the copies elsewhere.
	edited := bytes.Replace(raw, []byte(`"orders"`), []byte(`"attack"`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatal("the fixture's target is not in the stored form")
	}
	if err := e.rdb.Set(e.ctx, key, edited, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.LoadHeader(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("edited target, header only: %v, want a signature error", err)
	}
	_, err = tk.Load(e.ctx, tok)
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != "preview" || strings.Contains(err.Error(), tok) {
		t.Fatalf("edited target: %v, want a SignatureError without the token", err)
	}
	// A genuine record moved under another token.
	if err := e.rdb.Set(e.ctx, e.st.b.k.token(other), raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Load(e.ctx, other); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("a record under another token: %v", err)
	}
	// Unsigned (written before signing, or by hand).
	plain, _ := tokencodec.Encode(f)
	if err := e.rdb.Set(e.ctx, key, plain, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Load(e.ctx, tok); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("unsigned with a key: %v", err)
	}
	if len(*refused) != 4 {
		t.Fatalf("%d refusals reported, want 4", len(*refused))
	}
}

// TestSignedReplayEditedInRedisIsRefused: a replay record whose approver
// is changed in Redis is refused by Get, Update and List, and Update
// writes nothing; a record from before signing is read only when
// AcceptUnsigned says so, and a store without the key refuses signed ones.
func TestSignedReplayEditedInRedisIsRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	rs := e.st.Replays()
	r := engine.Replay{ID: "r_signedtest01", DLQ: "orders.dlq", State: engine.StatePaused, Requester: "U1", Approver: "U2", Total: 5}
	if err := rs.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := rs.Update(e.ctx, r.ID, func(x *engine.Replay) error { x.Note = "checked"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Get(e.ctx, r.ID); err != nil || got.Approver != "U2" || got.Note != "checked" {
		t.Fatalf("untouched: %+v %v", got, err)
	}
	key := e.st.b.k.replay(r.ID)
	raw, _ := e.rdb.HGet(e.ctx, key, fieldData).Result()
	edited := strings.Replace(raw, `"approver":"U2"`, `"approver":"U1"`, 1)
	if edited == raw || !strings.Contains(raw, `"_sig":"`) {
		t.Fatalf("stored form %s: want signed JSON naming the approver", raw)
	}
	if err := e.rdb.HSet(e.ctx, key, fieldData, edited).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Get(e.ctx, r.ID); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("Get: %v", err)
	}
	err := rs.Update(e.ctx, r.ID, func(x *engine.Replay) error { x.Note = "overwritten"; return nil })
	if !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("Update: %v", err)
	}
	if now, _ := e.rdb.HGet(e.ctx, key, fieldData).Result(); now != edited {
		t.Fatal("a refused Update wrote the record")
	}
	if l, err := rs.List(e.ctx, 0); err != nil || len(l) != 1 || !l[0].Unverifiable || l[0].ID != r.ID || l[0].Approver != "" {
		t.Fatalf("List: %+v %v, want the record by its id alone, unverifiable", l, err)
	}
	if len(*refused) != 3 {
		t.Fatalf("%d refusals reported, want 3", len(*refused))
	}

	// A record from before the upgrade: refused, unless accepted.
	legacy := raw[:strings.Index(raw, `,"_sig":"`)] + "}"
	if err := e.rdb.HSet(e.ctx, key, fieldData, legacy).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Get(e.ctx, r.ID); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("unsigned, not accepted: %v", err)
	}
	lenient, err := New(Config{Prefix: e.st.b.cfg.Prefix, SigningKey: testKey, AcceptUnsigned: true}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := lenient.Replays().Get(e.ctx, r.ID); err != nil || got.Approver != "U2" {
		t.Fatalf("unsigned, accepted: %+v %v", got, err)
	}
	// The next write signs it.
	if err := lenient.Replays().Update(e.ctx, r.ID, func(x *engine.Replay) error { x.Note = "signed now"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Get(e.ctx, r.ID); err != nil || got.Note != "signed now" {
		t.Fatalf("after a lenient write: %+v %v", got, err)
	}
	keyless, err := New(Config{Prefix: e.st.b.cfg.Prefix}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyless.Replays().Get(e.ctx, r.ID); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("a signed record without the key: %v", err)
	}
	if _, err := New(Config{SigningKey: []byte("short")}, e.rdb, e.clock); err == nil {
		t.Fatal("a 5-byte signing key was accepted")
	}
}
