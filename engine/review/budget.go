package review

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"strings"
)

// budgetView works out the preview's budget from the DLQ's state after the
// preview's own read; nil when no budget applies.
// rereads is how many looks for returns a step makes besides its move:
// RereadsPerStep, or 0 when a tap finds the returns.
func (s *Service) budgetView(dlq engine.QueueInfo, selected, rereads int) *engine.BudgetView {
	if !dlq.RequeueCounts {
		return nil
	}
	need, steps := engine.ReadsNeeded(selected, engine.Params{}, rereads)
	v := &engine.BudgetView{Limit: dlq.DeliveryLimit, LimitFrom: dlq.LimitFrom, DeliveryCount: dlq.DeliveryCount,
		ReadsLeft: dlq.ReadsLeft(), ReadsNeeded: need, Steps: steps}
	v.Raise = engine.RaiseLimit(s.cfg.Vhost, dlq, engine.SuggestedLimit(dlq, need))
	return v
}

// budgetDetail words the budget for the preview's problem list.
func budgetDetail(dlq engine.QueueInfo, v *engine.BudgetView, selected, rereads int) string {
	counts := "RabbitMQ before 4.3"
	if dlq.BrokerVersion != "" {
		counts = "RabbitMQ " + dlq.BrokerVersion
	}
	from := v.LimitFrom
	if from == "default" {
		from = "RabbitMQ 4's default for quorum queues"
	}
	d := fmt.Sprintf("read budget: every read of %s gives each message back with nack(requeue), which %s counts against its delivery limit of %d (%s); ", dlq.Name, counts, v.Limit, from)
	perStep := "one to move and one to look for returns"
	if rereads == 0 {
		perStep = "one to move; returns are found through the tap"
	}
	d += fmt.Sprintf("a replay of these %d message(s) needs %d reads (the approval's check, then per step %s; %d step(s) at the default 10, 20, 40… up to %d — smaller steps need more) and the limit leaves %d",
		selected, v.ReadsNeeded, perStep, v.Steps, engine.DefaultCap, v.ReadsLeft)
	if v.ReadsLeft < v.ReadsNeeded {
		d += " — the replay would stop by itself when the limit is near (nothing is dropped; it resumes once the limit is raised)"
	}
	if strings.HasPrefix(v.Raise, "rabbitmqctl") {
		d += ". To raise the limit: " + v.Raise
	} else {
		d += ". " + strings.ToUpper(v.Raise[:1]) + v.Raise[1:]
	}
	return d
}

// previewBudget reads the DLQ's state again after the preview's own read,
// so that the budget it shows counts that read.
func (s *Service) previewBudget(ctx context.Context, p *engine.Preview) error {
	if !p.DLQ.RequeueCounts {
		return nil
	}
	st, err := s.d.Broker.Inspect(ctx, p.DLQ.Name)
	if err != nil {
		return fmt.Errorf("engine: preview %s: %w", p.DLQ.Name, err)
	}
	if st.Exists {
		p.DLQ = st
	}
	return nil
}
