package blocks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestProgressShowsPace: a running auto-paced replay's card says what it
// sends at and why; once it ended, it does not.
func TestProgressShowsPace(t *testing.T) {
	pace := "pacing to the consumer: 48 msg/s; backlog 30"
	r := engine.Replay{ID: "r_1", DLQ: "orders.dlq", State: engine.StateRunning, Total: 100, Sent: 40, Pace: pace}
	bs, _ := ProgressAs("/dlq", r, nil)
	b, _ := json.Marshal(bs)
	if !strings.Contains(string(b), pace) {
		t.Fatalf("running card does not show %q: %s", pace, b)
	}
	r.State = engine.StateFinished
	bs, _ = ProgressAs("/dlq", r, nil)
	b, _ = json.Marshal(bs)
	if strings.Contains(string(b), "pacing to the consumer") {
		t.Fatalf("finished card still shows the pace: %s", b)
	}
}
