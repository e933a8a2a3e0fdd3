package blocks

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestProblemRetryStateWording: the preview says that the consumer would
// refuse replayed copies and what the replay does about it.
func TestProblemRetryStateWording(t *testing.T) {
	p := &engine.Preview{Selected: 5, Problems: []engine.Problem{{Kind: engine.ProblemRetryState, Messages: 5, Detail: "x"}}}
	got := problemsText(p)
	for _, want := range []string{"Consumer would refuse replayed copies", "5 messages", "the replay resets it"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems text %q lacks %q", got, want)
		}
	}
}
