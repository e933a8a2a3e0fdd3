package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestSlackRefs: the Slack front end's record merges what each writer
// knows, is apart from the replay record (a write of the replay leaves
// it), expires with the retention, and a replay recorded before it
// existed is read from the replay record's old fields and migrated.
func TestSlackRefs(t *testing.T) {
	t.Parallel()
	e, _ := signedEnv(t)
	sr, rs := e.st.SlackRefs(), e.st.Replays()
	r := engine.Replay{ID: "r_refs00000001", DLQ: "orders.dlq", State: engine.StateRunning}
	if err := rs.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := sr.Set(e.ctx, r.ID, "C1", "111.1", ""); err != nil {
		t.Fatal(err)
	}
	if err := sr.Set(e.ctx, r.ID, "", "", "222.2"); err != nil {
		t.Fatal(err)
	}
	if err := rs.Update(e.ctx, r.ID, func(x *engine.Replay) error { x.Sent = 5; return nil }); err != nil {
		t.Fatal(err)
	}
	if c, th, p, err := sr.Get(e.ctx, r.ID); err != nil || c != "C1" || th != "111.1" || p != "222.2" {
		t.Fatalf("refs %q %q %q %v", c, th, p, err)
	}
	if ttl := e.rdb.PTTL(e.ctx, e.st.b.k.slackRefs(r.ID)).Val(); ttl < 29*24*time.Hour {
		t.Errorf("refs expire in %s, want the retention", ttl)
	}
	if raw, _ := e.rdb.HGet(e.ctx, e.st.b.k.replay(r.ID), fieldData).Result(); strings.Contains(raw, "111.1") {
		t.Errorf("the replay record holds Slack's refs: %s", raw)
	}

	// A record from before: the three fields in the replay's JSON.
	old := engine.Replay{ID: "r_refs00000002", DLQ: "orders.dlq", State: engine.StateFinished}
	if err := rs.Create(e.ctx, old); err != nil {
		t.Fatal(err)
	}
	raw, _ := e.rdb.HGet(e.ctx, e.st.b.k.replay(old.ID), fieldData).Bytes()
	data, err := e.st.b.openReplay(old.ID, raw)
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.TrimSuffix(string(data), "}") + `,"channel":"C9","thread_ts":"9.1","progress_ts":"9.2"}`
	if err := e.rdb.HSet(e.ctx, e.st.b.k.replay(old.ID), fieldData, e.st.b.signReplay(old.ID, []byte(legacy))).Err(); err != nil {
		t.Fatal(err)
	}
	if c, th, p, err := sr.Get(e.ctx, old.ID); err != nil || c != "C9" || th != "9.1" || p != "9.2" {
		t.Fatalf("legacy refs %q %q %q %v", c, th, p, err)
	}
	if n := e.rdb.Exists(e.ctx, e.st.b.k.slackRefs(old.ID)).Val(); n != 1 {
		t.Error("the legacy refs were not migrated to their own record")
	}
	if c, _, _, err := sr.Get(e.ctx, "r_nobody"); err != nil || c != "" {
		t.Fatalf("unknown replay: %q %v", c, err)
	}
}

// TestSlackRefsEditedInRedisIsRefused: a signed Slack record whose channel
// is changed in Redis is refused by Get (reported, nothing returned to
// post into) and by Set (nothing written); an unsigned one is refused
// unless AcceptUnsigned says so.
func TestSlackRefsEditedInRedisIsRefused(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	sr := e.st.SlackRefs()
	id := "r_refssigned01"
	if err := sr.Set(e.ctx, id, "C0OPS", "111.1", "222.2"); err != nil {
		t.Fatal(err)
	}
	k := e.st.b.k.slackRefs(id)
	if sig, _ := e.rdb.HGet(e.ctx, k, slackRefsSig).Result(); len(sig) != 64 {
		t.Fatalf("stored signature %q: want a MAC", sig)
	}
	if err := e.rdb.HSet(e.ctx, k, "channel", "C0ATTACKER").Err(); err != nil {
		t.Fatal(err)
	}
	c, _, _, err := sr.Get(e.ctx, id)
	var se *SignatureError
	if !errors.Is(err, engine.ErrBadSignature) || !errors.As(err, &se) || se.Kind != "slack refs" || c != "" {
		t.Fatalf("edited channel: %q %v, want a signature error and no channel", c, err)
	}
	if err := sr.Set(e.ctx, id, "", "", "333.3"); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("Set over an edited record: %v", err)
	}
	if p, _ := e.rdb.HGet(e.ctx, k, "progress_ts").Result(); p != "222.2" {
		t.Fatalf("a refused Set wrote progress_ts %q", p)
	}
	if len(*refused) != 2 {
		t.Fatalf("%d refusals reported, want 2", len(*refused))
	}
	// Unsigned (from before signing): refused, unless accepted.
	if err := e.rdb.HDel(e.ctx, k, slackRefsSig).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.HSet(e.ctx, k, "channel", "C0OPS").Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := sr.Get(e.ctx, id); !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("unsigned: %v", err)
	}
	lenient, err := New(Config{Prefix: e.st.b.cfg.Prefix, SigningKey: testKey, AcceptUnsigned: true}, e.rdb, e.clock)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, p, err := lenient.SlackRefs().Get(e.ctx, id); err != nil || c != "C0OPS" || p != "222.2" {
		t.Fatalf("unsigned, accepted: %q %q %v", c, p, err)
	}
	// The next write signs it.
	if err := lenient.SlackRefs().Set(e.ctx, id, "", "", "444.4"); err != nil {
		t.Fatal(err)
	}
	if c, th, p, err := sr.Get(e.ctx, id); err != nil || c != "C0OPS" || th != "111.1" || p != "444.4" {
		t.Fatalf("after a lenient write: %q %q %q %v", c, th, p, err)
	}
}
