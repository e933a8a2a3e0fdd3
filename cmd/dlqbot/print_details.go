package main

import (
	"fmt"
	"io"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// showPreview is preview's report, here or through the server: the JSON
// document, or the readable preview followed, with --details, by its
// mechanics (else by how to ask for them).
func showPreview(out *output, p *engine.Preview) error {
	if out.json {
		return out.doc(p)
	}
	printPreview(out.w, p)
	switch {
	case out.details:
		fmt.Fprintln(out.w)
		printDetails(out.w, ops.DetailsOf(p))
	case p.Token != "":
		fmt.Fprintf(out.w, "How it would run (the first step's read, the read budget, finding returns): %s preview %s --details\n", commands.TerminalPrefix, p.Selection)
	}
	return nil
}

// printDetails prints a preview's mechanics: what Slack's Details button
// shows (blocks.PreviewDetails, from the same ops.PreviewDetails).
func printDetails(w io.Writer, d ops.PreviewDetails) {
	typ := d.Type
	if typ == "" {
		typ = "queue"
	}
	fmt.Fprintf(w, "Details of the preview of %s (%s):\n", d.DLQ, typ)
	fmt.Fprintf(w, "  Scanned %d message(s); %d parked, left out; %d target queue(s).\n", d.Scanned, d.Parked, d.Targets)
	if d.FirstStepDepth > 0 {
		fmt.Fprintf(w, "  First step: reads the first %d message(s) of the DLQ", d.FirstStepDepth)
		if d.Classes > 0 {
			fmt.Fprintf(w, ", holding a copy of %d of its %d failure class(es) (target × failure group)", d.CanaryClasses, d.Classes)
		}
		fmt.Fprintln(w, "; the later steps read on from there (the DLQ is read once).")
	}
	if b := d.Budget; b != nil {
		fmt.Fprintf(w, "  Read budget: %d read(s) left of the delivery limit %d", b.ReadsLeft, b.Limit)
		if b.LimitFrom != "" {
			fmt.Fprintf(w, " (%s)", b.LimitFrom)
		}
		fmt.Fprintf(w, "; a replay needs %d in %d step(s).\n", b.ReadsNeeded, b.Steps)
		if b.Raise != "" {
			fmt.Fprintf(w, "    To raise it: %s\n", b.Raise)
		}
	}
	if d.Returns.Detail != "" {
		mark := "  Finding returns: "
		if d.Returns.Mode == engine.ReturnsReread {
			mark = "  ! Finding returns: "
		}
		fmt.Fprintf(w, "%s%s\n", mark, d.Returns.Detail)
	}
	fmt.Fprintln(w, "  Steps: the first holds one message of every target and failure group, then each doubles up to the cap (step=, cap=).")
	fmt.Fprintln(w, "  Approving needs the replay permission on the DLQ and publish on every target.")
}
