package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stroma/dlqbot/ops"
)

// printDLQs is `dlqbot list`: the DLQs the caller may read, deepest
// first, with their last replay, then what was hidden and what to do
// next.
func printDLQs(w io.Writer, d ops.DLQs, now time.Time) {
	if len(d.DLQs) == 0 {
		fmt.Fprintln(w, "No dead-letter queue you may read was found.")
	} else {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DLQ\tMESSAGES\tCONSUMERS\tLAST REPLAY")
		for _, q := range d.DLQs {
			last := "never replayed"
			if r := q.LastReplay; r != nil {
				last = fmt.Sprintf("%s %s, %d of %d sent, %d came back, %s", r.ID, r.State, r.Sent, r.Total, r.Returned, agoWords(now.Sub(r.CreatedAt)))
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", q.Name, q.Messages, q.Consumers, last)
		}
		tw.Flush()
	}
	if d.Hidden > 0 {
		fmt.Fprintf(w, "%d more you have no read permission for are not shown.\n", d.Hidden)
	}
	fmt.Fprintln(w, d.Note)
	fmt.Fprintln(w, "Next: dlqbot preview <dlq>   (dlqbot status lists the replays)")
}

// agoWords says how long ago d was, coarsely.
func agoWords(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
