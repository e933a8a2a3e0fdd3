package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestPrintAfterATapLossNamesTheWindowNeverZeroBack: a check and a replay
// that could not see for some copies (the tap was gone, the DLQ could not
// be re-read) print the window and the count, never "0 came back"; the
// JSON carries it as "unseen" {count, from, to}.
func TestPrintAfterATapLossNamesTheWindowNeverZeroBack(t *testing.T) {
	from := time.Date(2026, 12, 1, 10, 0, 0, 120e6, time.UTC)
	u := &engine.Unseen{Count: 8, From: from, To: from.Add(350 * time.Millisecond)}
	var b strings.Builder
	printCheck(&b, engine.CheckReport{ReplayID: "r_1", DLQ: "orders.dlq", Replayed: 400, Unseen: u})
	printReplay(&b, engine.Replay{ID: "r_1", DLQ: "orders.dlq", State: engine.StateFinished, Sent: 400, Total: 400, Unseen: u})
	out := b.String()
	want := "could not tell for 8 copies (the tap was gone from 2026-12-01T10:00:00.120Z to 2026-12-01T10:00:00.470Z)"
	if strings.Count(out, want) != 2 || strings.Contains(out, "0 came back") {
		t.Fatalf("printed:\n%s\nwant %q twice, never \"0 came back\"", out, want)
	}
	raw, err := json.Marshal(engine.CheckReport{ReplayID: "r_1", Unseen: u})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"unseen":{"count":8,"from":"2026-12-01T10:00:00.12Z","to":"2026-12-01T10:00:00.47Z"}`) {
		t.Fatalf("check JSON %s", raw)
	}
	raw, _ = json.Marshal(engine.CheckReport{ReplayID: "r_1"})
	if strings.Contains(string(raw), "unseen") {
		t.Fatalf("a check that saw everything carries unseen: %s", raw)
	}
}
