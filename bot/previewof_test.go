package bot

import (
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestPreviewOfUnchanged: a frozen preview shown to whoever is asked to
// approve it keeps its targets' consumer verdicts and leads with the
// targets whose consumers were not restarted since the failures.
func TestPreviewOfUnchanged(t *testing.T) {
	p := previewOf(engine.Frozen{Token: "p_x", DLQ: "orders.dlq", Total: 60, Targets: []engine.TargetSnapshot{
		{Queue: "orders", Exists: true, Consumers: 3, Messages: 50, ConsumersSinceFailure: engine.SinceUnchanged},
		{Queue: "billing", Exists: true, Consumers: 1, Messages: 10, ConsumersSinceFailure: engine.SinceRestarted},
	}})
	if len(p.Problems) != 1 || p.Problems[0].Kind != engine.ProblemConsumersUnchanged || p.Problems[0].Queue != "orders" {
		t.Errorf("problems %+v: want consumers_unchanged on orders alone", p.Problems)
	}
	if len(p.Targets) != 2 || p.Targets[0].ConsumersSinceFailure != engine.SinceUnchanged || p.Targets[1].ConsumersSinceFailure != engine.SinceRestarted {
		t.Errorf("targets %+v", p.Targets)
	}
}
