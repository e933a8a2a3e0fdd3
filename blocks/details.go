package blocks

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// PreviewDetails renders what the preview's card leaves out, shown to
// whoever asks (the Details button): its mechanics (ops.PreviewDetails,
// the view `dlqbot preview --details` prints too: what was read, how the
// first step reads, the read budget, how returns would be found, the
// steps, what approving needs), when each failure group and source queue
// failed, and every target's consumers and dead-letter reasons. Like the
// card it names a failure group by its type and id only: whoever sees the
// card may ask for it.
func PreviewDetails(p *engine.Preview) ([]slack.Block, string) {
	if p == nil {
		return Error("There is no preview to show.")
	}
	d := ops.DetailsOf(p)
	dlq := code(d.DLQ, 300)
	if d.Type != "" {
		dlq += " (" + esc(d.Type, 20) + ")"
	}
	fs := []string{
		"*DLQ*\n" + dlq,
		"*Scanned*\n" + msgs(d.Scanned),
		"*Parked, left out*\n" + msgs(d.Parked),
		"*Target queues*\n" + num(d.Targets),
	}
	if d.FirstStepDepth > 0 {
		fs = append(fs, "*First step reads*\nthe first "+msgs(d.FirstStepDepth)+" of the DLQ"+canaryClasses(d))
	}
	if b := d.Budget; b != nil {
		s := fmt.Sprintf("*Read budget*\n%s left of the delivery limit %s; a replay needs %s in %s",
			plural(b.ReadsLeft, "read", "reads"), num(b.Limit), num(b.ReadsNeeded), plural(b.Steps, "step", "steps"))
		if b.Raise != "" {
			s += "\nTo raise it: " + esc(oneLine(b.Raise), 1000)
		}
		fs = append(fs, s)
	}
	out := []slack.Block{section(fmt.Sprintf("*Details of the preview of %s*", code(d.DLQ, 300))), fields(fs...)}
	if d.Returns.Detail != "" {
		out = append(out, contextBlock(BlockPreviewReturns, returnsLine(d.Returns)))
	}
	out = append(out, arrivalDetailBlocks(p.Arrivals)...)
	if len(p.Targets) > 0 {
		out = append(out, section(targetsText(p.Targets)))
	}
	out = append(out, contextBlock("", "Steps: the first holds one message of every target and failure group, then each doubles up to the cap (`step=`, `cap=`). Approving needs the replay permission on the DLQ and publish on every target."))
	return out, fallback("Details of the preview of " + escape(d.DLQ) + ".")
}

// canaryClasses says how many of the selection's failure classes (target
// × failure group) the first step holds a copy of ("" when unknown).
func canaryClasses(d ops.PreviewDetails) string {
	if d.Classes == 0 {
		return ""
	}
	return fmt.Sprintf(", holding a copy of %s of its %s", num(d.CanaryClasses), plural(d.Classes, "failure class", "failure classes"))
}
