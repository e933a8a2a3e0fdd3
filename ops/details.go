package ops

import "github.com/stroma/dlqbot/engine"

// PreviewDetails are a preview's mechanics, behind its verdict: what the
// scan read, how deep the replay's first step reads and how many of the
// selection's failure classes (target × failure group) it holds a copy
// of, the DLQ's read budget (nil when reads cost no delivery attempt) and
// how the copies that come back would be found. Slack's *Details* button
// (blocks.PreviewDetails) and `dlqbot preview --details` show these; none
// of it is a message's content.
type PreviewDetails struct {
	DLQ            string             `json:"dlq"`
	Type           string             `json:"type,omitempty"`
	Scanned        int                `json:"scanned"`
	Parked         int                `json:"parked"`
	Targets        int                `json:"targets"`
	FirstStepDepth int                `json:"first_step_depth"`
	CanaryClasses  int                `json:"canary_classes"`
	Classes        int                `json:"classes"`
	Budget         *engine.BudgetView `json:"read_budget,omitempty"`
	Returns        engine.ReturnsView `json:"returns"`
}

// DetailsOf returns p's mechanics.
func DetailsOf(p *engine.Preview) PreviewDetails {
	return PreviewDetails{DLQ: p.DLQ.Name, Type: p.DLQ.Type, Scanned: p.Scanned, Parked: p.Parked, Targets: len(p.Targets),
		FirstStepDepth: p.FirstStepDepth, CanaryClasses: p.CanaryClasses, Classes: p.Classes, Budget: p.Budget, Returns: p.Returns}
}
