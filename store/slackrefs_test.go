package store

import (
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
