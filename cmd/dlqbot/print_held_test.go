package main

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestPrintACheckBesideAReplayNamesItNeverZeroBack: a check whose read met
// messages another replay's read held prints what it saw back "so far" and
// what it did not read, naming the replay, never "0 came back" nor a count
// "not seen in a dead-letter queue" (copies may be among what it did not
// read).
func TestPrintACheckBesideAReplayNamesItNeverZeroBack(t *testing.T) {
	var b strings.Builder
	printCheck(&b, engine.CheckReport{ReplayID: "r_1", DLQ: "orders.dlq", Replayed: 10,
		HeldByReplay: &engine.HeldBy{Replays: []string{"r_2"}, Messages: 1700}})
	out := b.String()
	for _, want := range []string{"0 seen back in orders.dlq so far", "Not read: 1700 held by replay r_2"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed:\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, "came back") || strings.Contains(out, "not seen in a dead-letter queue") {
		t.Errorf("printed:\n%s\nwant neither \"came back\" nor \"not seen in a dead-letter queue\"", out)
	}
}
