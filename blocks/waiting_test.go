package blocks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestWaitingAfterNodeLoss: a running replay that waits for the broker
// after losing its node says so in its thread and on its progress message.
func TestWaitingAfterNodeLoss(t *testing.T) {
	text := "waiting for 4300 message(s) the reader held through node rmq-2:5672, which left the cluster"
	r := engine.Replay{ID: "r_1", DLQ: "orders.dlq", State: engine.StateRunning, Total: 5000, Sent: 900, Note: text}
	reply := StepReply(engine.Event{Kind: engine.EventWaiting, Replay: r, Text: text})
	if !strings.Contains(reply, "4300 message(s) the reader held through node rmq-2:5672") {
		t.Errorf("thread reply %q does not say what it waits for", reply)
	}
	blocks, _ := Progress(r, nil)
	b, err := json.Marshal(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Waiting") || !strings.Contains(string(b), "which left the cluster") {
		t.Errorf("progress message does not say it waits: %s", b)
	}
	r.Note = ""
	blocks, _ = Progress(r, nil)
	if b, _ = json.Marshal(blocks); strings.Contains(string(b), "Waiting") {
		t.Errorf("a running replay without a note shows Waiting: %s", b)
	}
}
