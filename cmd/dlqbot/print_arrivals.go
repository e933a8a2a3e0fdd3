package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
)

// maxArrivalRows is how many failure groups (or source queues) the text
// report draws.
const maxArrivalRows = 8

// printArrivals draws when the selected messages were dead-lettered: the
// overall sparkline, then one per failure group (else per source queue)
// when there are several, with the group ids that group= takes.
func printArrivals(w io.Writer, p *engine.Preview) {
	a := p.Arrivals
	if a == nil || a.Messages == 0 {
		return
	}
	dated := a.Messages - a.Undated
	if dated > 0 {
		end := a.Start.Add(time.Duration(len(a.Counts)) * a.Bucket)
		layout := "15:04"
		if end.Sub(a.Start) >= 24*time.Hour {
			layout = "Jan 2 15:04"
		}
		fmt.Fprintf(w, "Dead-lettered %s → %s UTC, each bar %s:\n", a.Start.UTC().Format(layout), end.UTC().Format(layout), blocks.Width(a.Bucket))
		fmt.Fprintf(w, "  %s  %d message(s), first %s, last %s; %s\n", blocks.Sparkline(a.Counts), dated, when(a.First), when(a.Last), arriving(a.ArrivalRow, a))
	}
	if a.Undated > 0 {
		fmt.Fprintf(w, "  %d message(s) without a failure time (Spring's recoverer records none): counted, not drawn.\n", a.Undated)
	}
	rows, byGroup, more := a.Groups, true, a.MoreGroups
	if len(rows)+min(more, 1) < 2 {
		rows, byGroup, more = a.Sources, false, a.MoreSources
	}
	if len(rows)+min(more, 1) >= 2 {
		if byGroup {
			fmt.Fprintln(w, "By failure group:")
		} else {
			fmt.Fprintln(w, "By source queue:")
		}
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		for i, r := range rows {
			if i == maxArrivalRows {
				for _, r := range rows[i:] {
					more += r.Messages
				}
				break
			}
			id, name := r.GroupID, r.Key
			if !byGroup {
				id = "-"
				if name == "" {
					name = "(no source queue)"
				}
			}
			line := "-"
			if r.Messages > r.Undated {
				line = "first " + r.First.UTC().Format("Jan 2 15:04") + ", last " + ago(a.Now.Sub(r.Last)) + ", " + arriving(r, a)
			}
			if r.Undated > 0 {
				line += fmt.Sprintf(", %d without a failure time", r.Undated)
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", blocks.Sparkline(r.Counts), r.Messages, id, clip(name, 70), line)
		}
		tw.Flush()
		if more > 0 {
			fmt.Fprintf(w, "  … %d more message(s) in other groups (use --json for the first %d)\n", more, engine.ArrivalRows)
		}
		if byGroup {
			fmt.Fprintf(w, "Preview one group: dlqbot preview %s group=<id>\n", p.Selection)
		}
	}
	fmt.Fprintln(w)
}

// arriving says whether a row's failures are still arriving.
func arriving(r engine.ArrivalRow, a *engine.Arrivals) string {
	if r.StillArriving() {
		return fmt.Sprintf("STILL ARRIVING: %d in the last %s", r.Recent, blocks.Width(a.RecentWindow))
	}
	return "none in the last " + blocks.Width(a.RecentWindow)
}

// ago words a duration in the past coarsely: "just now", "1h 16m ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", d/time.Minute)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm ago", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd %dh ago", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}
