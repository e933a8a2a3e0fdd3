package blocks

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInterruptedHintNamesTheCommand: the "preview the rest" hint of an
// interrupted replay is built from the replay's RestSelection with the
// command name the bot is installed under, not a "/dlq" the engine wrote.
func TestInterruptedHintNamesTheCommand(t *testing.T) {
	e := interruptedEvent()
	want := "/replayq preview orders.dlq reason=rejected"
	_, text := ProgressEventAs("/replayq", e)
	bl, _ := ProgressAs("/replayq", e.Replay, nil)
	js, err := json.Marshal(bl)
	if err != nil {
		t.Fatal(err)
	}
	reply := StepReplyAs("/replayq", e)
	for name, got := range map[string]string{"progress event": text + string(js), "step reply": reply} {
		if !strings.Contains(got, want) {
			t.Errorf("%s does not suggest %q:\n%s", name, want, got)
		}
		if strings.Contains(got, "/dlq") {
			t.Errorf("%s names /dlq:\n%s", name, got)
		}
	}
	e.Replay.RestSelection = ""
	if got := StepReplyAs("/replayq", e); strings.Contains(got, "preview") {
		t.Errorf("no selection, yet a preview hint: %s", got)
	}
}
