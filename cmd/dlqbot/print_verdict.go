package main

import (
	"fmt"
	"io"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
)

// printVerdict opens the readable preview: one headline (nothing to
// replay, safe to replay, or how many problems — counted as Slack's card
// counts them, engine.Warnings), then each problem on its own line,
// failures still arriving among them, then how returns would be found
// when that is a warning.
func printVerdict(w io.Writer, p *engine.Preview) {
	fmt.Fprintln(w, headline(p))
	if engine.StillArriving(p.Arrivals) {
		fmt.Fprintf(w, "  ! Still arriving: %d in the last %s: the cause may not be fixed yet.\n", p.Arrivals.Recent, blocks.Width(p.Arrivals.RecentWindow))
	}
	for _, pr := range p.Problems {
		if pr.Kind == engine.ProblemPartialRead {
			fmt.Fprintf(w, "  ! PARTIAL READ: %s\n", pr.Detail)
			continue
		}
		fmt.Fprintf(w, "  ! %s\n", pr.Detail)
	}
	if p.Returns.Mode == engine.ReturnsReread && p.Returns.Detail != "" {
		// A warning, shown with the verdict; a tap is a mechanic (--details).
		fmt.Fprintf(w, "Finding returns:\n  ! %s\n", p.Returns.Detail)
	}
	fmt.Fprintln(w)
}

// headline is the preview's verdict on one line, in the terminal's words
// for what Slack's card says first.
func headline(p *engine.Preview) string {
	targets := fmt.Sprintf("%d target queues", len(p.Targets))
	if len(p.Targets) == 1 {
		targets = "1 target queue"
	}
	what := fmt.Sprintf("%d message(s) from %s to %s", p.Selected, p.DLQ.Name, targets)
	switch n := p.Warnings(); {
	case p.Token == "":
		return fmt.Sprintf("Nothing to replay from %s: %s. The DLQ is unchanged.", p.DLQ.Name, blocks.NothingWhy(p))
	case n == 0:
		return "Safe to replay: " + what
	case n == 1:
		return "1 problem: " + what
	default:
		return fmt.Sprintf("%d problems: %s", n, what)
	}
}
