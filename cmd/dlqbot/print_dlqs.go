package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stroma/dlqbot/ops"
)

// printDLQs is `dlqbot list`: the DLQs the caller may read, deepest
// first, with their arrivals in the last hour, top failure group and last
// replay, then what was hidden and what to do next.
func printDLQs(w io.Writer, d ops.DLQs, now time.Time) {
	if len(d.DLQs) == 0 {
		fmt.Fprintln(w, "No dead-letter queue you may read was found.")
	} else {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DLQ\tMESSAGES\tARRIVED IN THE LAST HOUR\tTOP GROUP\tCONSUMERS\tLAST REPLAY")
		for _, q := range d.DLQs {
			last := "never replayed"
			if r := q.LastReplay; r != nil {
				last = fmt.Sprintf("%s %s, %d of %d sent, %d came back, %s", r.ID, r.State, r.Sent, r.Total, r.Returned, agoWords(now.Sub(r.CreatedAt)))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", q.Name, q.Messages, arrivedWords(q), topGroupWords(q.TopGroup, now), q.Consumers, last)
		}
		tw.Flush()
	}
	if d.Hidden > 0 {
		fmt.Fprintf(w, "%d more you have no read permission for are not shown.\n", d.Hidden)
	}
	fmt.Fprintln(w, d.Note)
	fmt.Fprintln(w, "Next: dlqbot preview <dlq>   (dlqbot status lists the replays)")
}

// arrivedWords is a DLQ's arrivals in the last hour: a count, "since
// HH:MM UTC" when the broker's samples cover less, or "unknown".
func arrivedWords(q ops.DLQ) string {
	if q.ArrivalsLastHour == nil {
		return "unknown"
	}
	if !q.ArrivalsSince.IsZero() {
		return fmt.Sprintf("%d since %s UTC", *q.ArrivalsLastHour, q.ArrivalsSince.UTC().Format("15:04"))
	}
	return fmt.Sprint(*q.ArrivalsLastHour)
}

// topGroupWords is a DLQ's top failure group by id and type, with its
// count at the preview that saw it.
func topGroupWords(g *ops.TopGroup, now time.Time) string {
	if g == nil {
		return "not previewed"
	}
	return fmt.Sprintf("%s %s (%d at the preview %s)", g.GroupID, g.Type, g.Messages, agoWords(now.Sub(g.SeenAt)))
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
