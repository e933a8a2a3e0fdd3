package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// maxRows is how many messages the text report lists.
const maxRows = 20

// printPreview is the readable preview: its verdict and problems first
// (printVerdict), then the numbers, arrivals, targets and messages.
func printPreview(w io.Writer, p *engine.Preview) {
	printVerdict(w, p)
	typ := p.DLQ.Type
	if typ == "" {
		typ = "queue"
	}
	fmt.Fprintf(w, "Preview of %s (%s, %d ready, %d consumer(s))\n", p.DLQ.Name, typ, p.DLQ.Ready, p.DLQ.Consumers)
	fmt.Fprintf(w, "Selection: %s\n", p.Selection)
	fmt.Fprintf(w, "Scanned %d message(s): %d selected (%d distinct), %d parked. Nothing was changed.\n", p.Scanned, p.Selected, p.Distinct, p.Parked)
	fmt.Fprintln(w)
	printArrivals(w, p)
	if len(p.Targets) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TARGET\tEXISTS\tCONSUMERS\tSINCE FAILURE\tLAST FAILURE\tMESSAGES\tREASONS")
		for _, t := range p.Targets {
			since := string(t.ConsumersSinceFailure)
			if since == "" {
				since = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\n", t.Queue, yesNo(t.Exists), t.Consumers, since, when(t.LastFailure), t.Messages, reasons(t.Reasons))
		}
		tw.Flush()
		printConsumerConns(w, p.Targets)
		printMixedScripts(w, p.Targets)
		fmt.Fprintln(w)
	}
	if len(p.Messages) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tCOPIES\tTARGET\tREASON\tATTEMPTS\tLAST DEATH\tREPLAYED\tFAILURE")
		for i, m := range p.Messages {
			if i == maxRows {
				hint := "use --json for all"
				if p.Rows > len(p.Messages) {
					hint = fmt.Sprintf("--json lists the first %d", len(p.Messages))
				}
				fmt.Fprintf(tw, "… %d more (%s)\n", max(p.Rows, len(p.Messages))-maxRows, hint)
				break
			}
			target := m.Target
			switch {
			case m.Parked:
				target = "(parked)"
			case target == "":
				target = "(unknown: " + m.SourceNote + ")"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\n", m.ID, m.Count, target, m.Reason, m.Attempts,
				when(m.LastDeath), replayed(m), clip(m.FailureGroup, 60))
		}
		tw.Flush()
		fmt.Fprintln(w)
		for _, m := range p.Messages {
			if h := engine.HeaderLine(m.Headers); h != "" {
				fmt.Fprintf(w, "  %s headers: %s\n", m.ID, clip(h, 200))
			}
			if m.Excerpt != "" {
				fmt.Fprintf(w, "  %s: %s\n", m.ID, clip(strings.ReplaceAll(m.Excerpt, "\n", " "), 100))
			}
		}
	}
	if p.Token != "" {
		fmt.Fprintf(w, "\nToken: %s (valid until %s)\nReplay it: dlqbot replay %s\n", p.Token, p.ExpiresAt, p.Token)
	} else {
		fmt.Fprintln(w, "\nNothing to replay: no token was made.")
	}
}

func printReplay(w io.Writer, r engine.Replay) {
	if r.State.Terminal() || r.State == engine.StateStopped {
		fmt.Fprintf(w, "Replay %s: %s, verdict %s\n", r.ID, r.State, r.Verdict())
	} else {
		fmt.Fprintf(w, "Replay %s: %s\n", r.ID, r.State)
	}
	if r.Missing > 0 {
		fmt.Fprintf(w, "  !! %d message(s) MISSING: neither sent by dlqbot nor in %s any more (dlqbot did not send them)\n", r.Missing, r.DLQ)
	}
	fmt.Fprintf(w, "  from %s, approved by %s, requested by %s\n", r.DLQ, r.Approver, r.Requester)
	fmt.Fprintf(w, "  step %d; sent %d of %d; settled %d; came back %d; missing %d; not delivered %d; new failures during the replay %d\n",
		r.Step, r.Sent, r.Total, r.Settled, r.Returned, r.Missing, r.Failed, r.NewFailures)
	if r.Unseen != nil {
		fmt.Fprintf(w, "  !! %s: the DLQ's tap was gone and the DLQ could not be re-read; \"came back\" counts only what was seen\n", r.Unseen.Words())
	}
	if r.InDoubt > 0 || r.Duplicates > 0 {
		fmt.Fprintf(w, "  in doubt %d (in flight when the connection was lost), duplicates %d (confirmed, original not acked): all listed in the ledger, never sent again\n", r.InDoubt, r.Duplicates)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	if r.Pace != "" && r.State == engine.StateRunning {
		fmt.Fprintf(w, "  %s\n", r.Pace)
	}
	if r.State == engine.StateInterrupted && r.RestSelection != "" {
		fmt.Fprintf(w, "  To replay the rest, preview it again: %s preview %s\n", commands.TerminalPrefix, r.RestSelection)
	}
	for i, f := range r.Failures {
		if i == maxRows {
			fmt.Fprintf(w, "  … %d more\n", len(r.Failures)-maxRows)
			break
		}
		fmt.Fprintf(w, "  %-10s %s → %s %s %s\n", f.Kind, f.ID, f.Target, f.Reason, clip(f.Detail, 80))
	}
}

func printList(w io.Writer, rs []engine.Replay) {
	if len(rs) == 0 {
		fmt.Fprintln(w, "No replays yet.")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLAY\tSTATE\tDLQ\tSENT\tTOTAL\tCAME BACK\tAPPROVER\tCREATED")
	for _, r := range rs {
		if r.Unverifiable {
			fmt.Fprintf(tw, "%s\tUNVERIFIABLE\t(its record failed its check)\t\t\t\t\t\n", r.ID)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.ID, r.State, r.DLQ, r.Sent, r.Total, r.Returned, r.Approver, when(r.CreatedAt))
	}
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func reasons(m map[engine.Reason]int) string {
	var parts []string
	for r, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", r, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func replayed(m engine.PreviewMessage) string {
	if len(m.Replayed) > 0 {
		h := m.Replayed[0]
		return fmt.Sprintf("%s %s", h.ReplayID, when(h.At))
	}
	if m.ReplayCount > 0 {
		return fmt.Sprintf("%d× (%s)", m.ReplayCount, m.ReplayID)
	}
	return "-"
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func printCheck(w io.Writer, c engine.CheckReport) {
	switch {
	case c.Unseen != nil:
		fmt.Fprintf(w, "Replay %s: of %d message(s) sent, %d seen back in %s; %s: the DLQ could not be re-read in its place, so copies that came back then were not seen.\n",
			c.ReplayID, c.Replayed, c.Returned, c.DLQ, c.Unseen.Words())
	case c.HeldByReplay != nil:
		// The line below says what was not read: copies may be among it.
		fmt.Fprintf(w, "Replay %s: of %d message(s) sent, %d seen back in %s so far.\n", c.ReplayID, c.Replayed, c.Returned, c.DLQ)
	default:
		fmt.Fprintf(w, "Replay %s: of %d message(s) sent, %d came back to %s", c.ReplayID, c.Replayed, c.Returned, c.DLQ)
		if c.Replayed > 0 {
			fmt.Fprintf(w, "; %d not seen in a dead-letter queue", max(0, c.Replayed-c.Returned))
		}
		fmt.Fprintln(w, ".")
	}
	if h := c.HeldByReplay; h != nil {
		fmt.Fprintf(w, "Not read: %s (dlqbot's own read of %s); check again once it ends.\n", h.Words(), c.DLQ)
	}
	if len(c.Groups) > 0 {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "COUNT\tGROUP ID\tFAILURE\tEXAMPLE")
		for _, g := range c.Groups {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", g.Count, engine.GroupID(g.Group), clip(g.Group, 80), g.ExampleID)
		}
		tw.Flush()
		fmt.Fprintf(w, "Preview the copies back: dlqbot preview %s replayed_by=%s [group=<group id>]\n", c.DLQ, c.ReplayID)
	}
	fmt.Fprintf(w, "New failures since the replay began (without its id, up to this check): %d\n", c.NewFailures)
	if c.AtParkLimit > 0 {
		fmt.Fprintf(w, "%d message(s) were replayed %d times or more without success: dlqbot park %s moves them to the parking queue (or Slack's Park button).\n", c.AtParkLimit, c.ParkAfter, c.ReplayID)
	}
}

// printConsumerConns lists, per target, when its consumers' connections
// opened and what the clients call themselves (the first few): what the
// SINCE FAILURE verdict was judged from.
func printConsumerConns(w io.Writer, targets []engine.TargetView) {
	const most = 3
	for _, t := range targets {
		for i, c := range t.ConsumerConns {
			if i == most {
				fmt.Fprintf(w, "  %s: … %d more consumer(s)\n", t.Queue, len(t.ConsumerConns)-most)
				break
			}
			var who []string
			for _, s := range []string{strings.TrimSpace(c.Product + " " + c.Version), c.ConnectionName} {
				if s != "" {
					who = append(who, clip(s, 60))
				}
			}
			line := fmt.Sprintf("  %s: a consumer connected %s", t.Queue, when(c.ConnectedAt))
			if len(who) > 0 {
				line += " (" + strings.Join(who, ", ") + ")"
			}
			fmt.Fprintln(w, line)
		}
	}
}

// printMixedScripts flags each target whose name mixes scripts whose
// letters look alike ("оrders" with a Cyrillic о reads as "orders"): its
// name, then quoted with Go escapes, which shows the odd letters.
func printMixedScripts(w io.Writer, targets []engine.TargetView) {
	for _, t := range targets {
		if m := engine.MixedScripts(t.Queue); m != "" {
			fmt.Fprintf(w, "  ! %s (%s) looks like a plain name but mixes %s letters: check the name\n", t.Queue, strconv.QuoteToASCII(t.Queue), m)
		}
	}
}
