package blocks

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// BlockPreviewStatus is the first block of an approved preview: its
// replay's state and verdict on one line, edited through the replay's life.
const BlockPreviewStatus = "dlq.preview.status"

// Outcome is a replay's state and verdict on one line of mrkdwn, the same
// words on the preview's message, the outcome line posted in the channel
// and the progress message's head:
//
//	🛑 Stopped by itself at step 1: 3 of 10 came back — rejected
//	🏁 Finished clean: 400 sent, 400 settled, 0 back
//	⚠️ Finished — 12 of 32 came back
func Outcome(r engine.Replay) string {
	id := code(r.ID, 60)
	sentOf := fmt.Sprintf("%s of %s sent", num(r.Sent), num(r.Total))
	switch r.State {
	case engine.StateQueued:
		return fmt.Sprintf(":hourglass_flowing_sand: *Queued*: replay %s waits for a worker", id)
	case engine.StateRunning:
		// Counts change at every step, and the preview is edited only when
		// the state or verdict changes: the progress message has them.
		return fmt.Sprintf(":arrow_forward: *Running*: replay %s of %s in canary steps; its progress is in the thread", id, msgs(r.Total))
	case engine.StatePaused:
		return fmt.Sprintf(":double_vertical_bar: *Paused*%s: replay %s, %s", actorOf(r.Note, "paused"), id, sentOf) + backSoFar(r) + "; the rest wait in the DLQ"
	case engine.StateStopped:
		s := ":octagonal_sign: *Stopped by itself*"
		if r.Step > 0 {
			s += " at step " + num(r.Step)
		}
		s += ": "
		switch {
		case r.Returned > 0:
			s += fmt.Sprintf("%s of %s came back", num(r.Returned), num(r.Sent))
			s += topReturn(r)
		case r.Verdict() == engine.VerdictCouldNotTell:
			s += "could not tell whether every copy stayed away, " + sentOf
			if r.Note != "" {
				s += " — " + esc(oneLine(r.Note), 200)
			}
		default:
			s += sentOf + ", " + esc(oneLine(r.Note), 200)
		}
		return s + " · replay " + id
	case engine.StateCancelled:
		return fmt.Sprintf(":black_square_for_stop: *Cancelled*%s: replay %s, %s", actorOf(r.Note, "cancelled"), id, sentOf) + backSoFar(r) + "; the rest stay in the DLQ"
	case engine.StateInterrupted:
		return fmt.Sprintf(":zap: *Interrupted*: replay %s, %s", id, sentOf) + backSoFar(r) + "; the rest are still in the DLQ"
	case engine.StateFinished:
		switch r.Verdict() {
		case engine.VerdictClean:
			return fmt.Sprintf(":checkered_flag: *Finished clean*: %s sent, %s settled, 0 back · replay %s", num(r.Sent), num(r.Settled), id)
		case engine.VerdictCameBack:
			return fmt.Sprintf(":warning: *Finished — %s of %s came back*: %s settled · replay %s", num(r.Returned), num(r.Sent), num(r.Settled), id)
		default:
			return fmt.Sprintf(":grey_question: *Finished — could not tell* whether every copy stayed away: %s sent, %s settled, %s · replay %s",
				num(r.Sent), num(r.Settled), cameBack(r.Returned, r.Unseen), id)
		}
	}
	return fmt.Sprintf("*%s*: replay %s, %s", esc(oneLine(string(r.State)), 30), id, sentOf)
}

// actorOf is " by <@U…>" for a note the engine wrote as "<verb> by
// <who>[; …]", so that people appear as Slack shows them; "" otherwise.
func actorOf(note, verb string) string {
	rest, ok := strings.CutPrefix(note, verb+" by ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ";")
	if name = strings.TrimSpace(name); name == "" || name == "an operator" {
		return ""
	}
	return " by " + who(name)
}

// backSoFar is ", N came back" when some did, else "".
func backSoFar(r engine.Replay) string {
	if r.Returned == 0 && r.Unseen == nil {
		return ""
	}
	return ", " + cameBack(r.Returned, r.Unseen)
}

// topReturn is " — <type> (group <id>)" for the failure group most of
// r's listed returned copies are in: what a channel may see of it, its
// exception's type else its dead-letter reason (engine.FailureType; never
// the exception's message), and the id check groups it under, with how
// many other groups came back. Without one largest group it names the
// first copy's type alone; "" when no copy is listed.
func topReturn(r engine.Replay) string {
	var (
		first  *engine.Failure
		counts = map[string]int{}
		order  []string
	)
	for i, f := range r.Failures {
		if f.Kind != engine.FailureReturned {
			continue
		}
		if first == nil {
			first = &r.Failures[i]
		}
		if f.GroupID == "" {
			continue
		}
		if counts[f.GroupID] == 0 {
			order = append(order, f.GroupID)
		}
		counts[f.GroupID]++
	}
	if first == nil {
		return ""
	}
	top, tied := "", false
	for _, g := range order {
		switch {
		case counts[g] > counts[top]:
			top, tied = g, false
		case counts[g] == counts[top]:
			tied = true
		}
	}
	if top == "" || tied {
		return " — " + esc(oneLine(failureTypeOf(*first)), 80)
	}
	for i := range r.Failures {
		if f := r.Failures[i]; f.Kind == engine.FailureReturned && f.GroupID == top {
			first = &r.Failures[i]
			break
		}
	}
	s := " — " + esc(oneLine(failureTypeOf(*first)), 80) + " (group " + code(top, 20)
	if n := len(order) - 1; n > 0 {
		s += "; " + plural(n, "other group", "other groups") + " came back too"
	}
	return s + ")"
}

// failureTypeOf is a returned copy's failure type (engine.FailureType).
func failureTypeOf(f engine.Failure) string {
	return engine.FailureType("", f.Detail, engine.Reason(f.Reason))
}

// Links are where a replay can be followed: its Slack thread and its
// dashboard page, each "" when unknown.
type Links struct {
	Thread, Dashboard string
}

// ReplayLinks builds a replay's links: the thread's Slack address under
// workspace (https://acme.slack.com; "" for none) and the replay's page
// under dashboard (the dashboard's base address; "" for none).
func ReplayLinks(workspace, channel, thread, dashboard, replayID string) Links {
	var l Links
	if workspace != "" && channel != "" && thread != "" {
		l.Thread = strings.TrimRight(workspace, "/") + "/archives/" + url.PathEscape(channel) + "/p" +
			strings.ReplaceAll(thread, ".", "") + "?thread_ts=" + url.QueryEscape(thread) + "&cid=" + url.QueryEscape(channel)
	}
	if dashboard != "" && replayID != "" {
		l.Dashboard = strings.TrimRight(dashboard, "/") + "/dashboard/replays/" + url.PathEscape(replayID)
	}
	return l
}

// Text is the links as mrkdwn (" · <…|thread> · <…|dashboard>"), "" when
// there are none.
func (l Links) Text() string {
	s := ""
	if l.Thread != "" {
		s += " · <" + l.Thread + "|thread>"
	}
	if l.Dashboard != "" {
		s += " · <" + l.Dashboard + "|dashboard>"
	}
	return s
}

// OutcomeLine is the one line posted in the replay's channel (not in its
// thread) when it stops, finishes, is cancelled or is interrupted: its
// outcome, of which DLQ, and its links.
func OutcomeLine(r engine.Replay, l Links) string {
	return clip(oneLine(Outcome(r)+" · "+code(r.DLQ, 120)+l.Text()), maxLine)
}

// PreviewStatus edits an approved preview (its rendered blocks, nil when
// not known here) to lead with its replay's state and verdict: the status
// line first, the buttons and expiry removed, who approved it last. Without
// the preview's blocks it is the status line and a line naming the replay.
func PreviewStatus(original []slack.Block, r engine.Replay, l Links) ([]slack.Block, string) {
	status := slack.NewSectionBlock(mrkdwn(Outcome(r)+l.Text(), MaxSectionText), nil, nil, slack.SectionBlockOptionBlockID(BlockPreviewStatus))
	kept := make([]slack.Block, 0, len(original))
	for _, b := range original {
		if b != nil && b.ID() == BlockPreviewStatus {
			continue
		}
		kept = append(kept, b)
	}
	var body []slack.Block
	if len(kept) > 0 {
		body = resolve(kept, approvedLine(r.Approver, r.ID))
	} else {
		body = []slack.Block{contextBlock(BlockPreviewOutcome, fmt.Sprintf("Preview of %s approved by %s; the replay's progress is in the thread.", code(r.DLQ, 120), who(r.Approver)))}
	}
	if len(body) >= MaxBlocks { // room for the status: cut before the approval line
		body = append(body[:MaxBlocks-2], body[len(body)-1])
	}
	text := fmt.Sprintf("Replay %s of %s: %s, %s.", escape(r.ID), escape(r.DLQ), escape(string(r.State)), escape(string(r.Verdict())))
	return append([]slack.Block{status}, body...), fallback(text)
}

// FrozenPreview renders the preview behind a token as the token store
// keeps it, for a replica that did not post the preview to edit it
// (PreviewStatus) wherever the replay runs. With the token's card
// (engine.PreviewCard) it is the preview's own body, verdict first: the
// headline, the problems, the numbers, the failure groups by id and type,
// the targets. A token without a card gives what its header holds: what
// would be replayed, from where, to where and at whose request.
func FrozenPreview(f engine.Frozen) []slack.Block {
	if c := f.Card; c != nil {
		return previewBody(&engine.Preview{Token: f.Token, DLQ: engine.QueueInfo{Name: f.DLQ}, Selection: f.Selection,
			Requester: f.Requester, Selected: f.Total, Distinct: f.Distinct, Parked: c.Parked,
			Problems: c.Problems, Targets: c.Targets, Arrivals: c.Arrivals, Returns: c.Returns})
	}
	targets := len(f.ItemTargets)
	if targets == 0 {
		targets = len(f.Targets)
	}
	head := fmt.Sprintf("*Preview* of %s from %s to %s", msgs(f.Total), code(f.DLQ, 300), plural(targets, "target queue", "target queues"))
	summary := summaryLine(&engine.Preview{Selection: f.Selection, Selected: f.Total, Distinct: f.Distinct, Requester: f.Requester})
	return []slack.Block{section(head), contextBlock("", summary)}
}
