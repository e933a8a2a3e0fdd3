package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestReadsNeeded(t *testing.T) {
	cases := []struct {
		total            int
		p                Params
		rereads          int
		wantReads, steps int
	}{
		{0, Params{}, 1, 1, 0},
		{10, Params{}, 1, 3, 1},
		{16, Params{}, 1, 5, 2},                          // 10, 20
		{400, Params{}, 1, 13, 6},                        // 10, 20, 40, 80, 160, 320
		{400, Params{Step: 5, Cap: 10}, 1, 1 + 41*2, 41}, // 5, then 10 at a time
		{400, Params{Step: 5, Cap: 10}, 0, 1 + 41, 41},   // returns found without reading
	}
	for _, c := range cases {
		reads, steps := ReadsNeeded(c.total, c.p, c.rereads)
		if reads != c.wantReads || steps != c.steps {
			t.Errorf("ReadsNeeded(%d, %+v, %d) = %d reads, %d steps; want %d, %d", c.total, c.p, c.rereads, reads, steps, c.wantReads, c.steps)
		}
	}
}

func TestReadsLeftAndBudgetError(t *testing.T) {
	q := QueueInfo{Name: "orders.dlq", DeliveryLimit: 20, ReadCounts: ReadCounts{RequeueCounts: true, LimitFrom: "default", DeliveryCount: 17, BrokerVersion: "4.0.5"}}
	if got := q.ReadsLeft(); got != 2 {
		t.Fatalf("ReadsLeft = %d, want 20 − 1 reserve − 17 = 2", got)
	}
	if err := BudgetError(q, 2, ""); err != nil {
		t.Fatalf("2 reads of 2 left refused: %v", err)
	}
	err := BudgetError(q, 3, "rabbitmqctl set_policy x")
	var rbe *ReadBudgetError
	if !errors.Is(err, ErrReadBudget) || !errors.As(err, &rbe) || rbe.Left != 2 || rbe.Need != 3 {
		t.Fatalf("budgetError = %v, want ErrReadBudget with 3 needed, 2 left", err)
	}
	for _, w := range []string{"orders.dlq has a delivery limit of 20 (default)", "17 time(s)", "needs 3 reads", "leaves 2", "nothing was read", "RabbitMQ 4.0.5", "read it again: rabbitmqctl set_policy x"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
	if (QueueInfo{DeliveryLimit: 20}).ReadsLeft() != -1 {
		t.Fatal("a queue whose give-backs do not count has a budget")
	}
	if (QueueInfo{ReadCounts: ReadCounts{RequeueCounts: true, DeliveryCount: 3}, DeliveryLimit: 2}).ReadsLeft() != 0 {
		t.Fatal("ReadsLeft went negative")
	}
}

func TestRaiseLimit(t *testing.T) {
	q := QueueInfo{Name: "it's.dlq", DeliveryLimit: 20, ReadCounts: ReadCounts{RequeueCounts: true, LimitFrom: "default"}}
	if got, want := RaiseLimit("/", q, 60), `rabbitmqctl set_policy -p / --apply-to queues 'dlqbot-limit-it'\''s.dlq' '^it'\''s\.dlq$' '{"delivery-limit":60}'`; got != want {
		t.Errorf("new policy:\n got  %s\n want %s", got, want)
	}
	q.Policy = &Policy{Name: "dlx", Pattern: `\.dlq$`, ApplyTo: "quorum_queues", Priority: 3, Definition: map[string]any{"delivery-limit": 20, "max-length": 1000}}
	q.LimitFrom = "policy"
	if got, want := RaiseLimit("prod", q, 60), `rabbitmqctl set_policy -p prod --priority 3 --apply-to quorum_queues dlx '\.dlq$' '{"delivery-limit":60,"max-length":1000}'`; got != want {
		t.Errorf("existing policy (its other keys kept):\n got  %s\n want %s", got, want)
	}
	if q.Policy.Definition["delivery-limit"] != 20 {
		t.Error("RaiseLimit changed the queue's policy definition")
	}
	q.LimitFrom = "argument"
	if got := RaiseLimit("/", q, 60); strings.HasPrefix(got, "rabbitmqctl") || !strings.Contains(got, "x-delivery-limit argument") {
		t.Errorf("a limit set by the argument: %s", got)
	}
	if got := SuggestedLimit(QueueInfo{DeliveryLimit: 20, ReadCounts: ReadCounts{DeliveryCount: 17}}, 13); got != 40 {
		t.Errorf("SuggestedLimit = %d, want 40 (17 + 13 + 1 + 5, rounded up)", got)
	}
	if got := SuggestedLimit(QueueInfo{DeliveryLimit: 20, ReadCounts: ReadCounts{DeliveryCount: 1}}, 13); got != 40 {
		t.Errorf("SuggestedLimit = %d, want 40 (twice the limit of 20)", got)
	}
}
