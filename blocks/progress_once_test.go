package blocks

import (
	"strings"
	"testing"
)

// A replay stopped by copies that came back says so once on its card: the
// step line gives its numbers, the stop line why it stopped (the step's
// observation without the counts), the Came back field alone that they
// carry this replay's id. A step line whose observation is not the stop's keeps it.
func TestStoppedCardSaysWhatCameBackOnce(t *testing.T) {
	r, st := stoppedReplay()
	card := string(marshal(t, rendered(Progress(r, st))))
	for _, phrase := range []string{"came back to orders.dlq", "with this replay's id"} {
		if n := strings.Count(card, phrase); n != 1 {
			t.Errorf("the stopped card says %q %d times, want once:\n%s", phrase, n, card)
		}
	}
	if !strings.Contains(card, "*Step 2* — sent 20 of 20 · 8 settled · 12 came back · 9s") {
		t.Errorf("the step line lost its numbers:\n%s", card)
	}
	other := *st
	other.Observation = "8 of 20 settled within 9s; 12 came back to orders.dlq; judged by the target queue's own count and the tap"
	if card := string(marshal(t, rendered(Progress(r, &other)))); !strings.Contains(card, "judged by the target queue's own count") {
		t.Errorf("the step line dropped an observation the stop line does not say:\n%s", card)
	}
}
