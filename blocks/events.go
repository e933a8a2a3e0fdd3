package blocks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// maxLine caps a thread reply or an activity line.
const maxLine = 1500

// StepReplyAs returns the short reply posted in the replay's thread for an
// event: one line of mrkdwn for a start, a step's result, a stop, pause,
// resume, cancellation, finish or interruption, naming the slash command
// command ("/dlq") in its hints. It returns "" for events that deserve no
// reply of their own (a step starting).
func StepReplyAs(command string, e engine.Event) string {
	r, p := e.Replay, e.Replay.Params
	rest, dlq := remaining(r), code(r.DLQ, 120)
	var s string
	switch e.Kind {
	case engine.EventStarted:
		s = fmt.Sprintf(":arrow_forward: Replay started: %s from %s in canary steps (first step %s, doubling up to %s, %s).",
			msgs(r.Total), dlq, num(p.Step), num(p.Cap), paceText(p))
		if tw := engine.TakeOverWords(r); tw != "" {
			s += " " + esc(oneLine(strings.ToUpper(tw[:1])+tw[1:]), 600) + "."
		}
	case engine.EventResumed:
		s = fmt.Sprintf(":arrow_forward: Resumed: %s left to send.", msgs(rest))
	case engine.EventStepPassed:
		if e.Step == nil {
			return clip(":white_check_mark: "+esc(oneLine(e.Text), 600), maxLine)
		}
		s = ":white_check_mark: " + stepLine(e.Step, "Step "+num(e.Step.Step)+" passed"+sizeWhy(p, *e.Step))
	case engine.EventStopped:
		if e.Step != nil {
			s = ":octagonal_sign: " + stepLine(e.Step, "Stopped after step "+num(e.Step.Step)+sizeWhy(p, *e.Step))
		} else {
			s = ":octagonal_sign: Stopped: " + esc(oneLine(firstOf(r.Note, e.Text)), 600)
		}
		if rest > 0 {
			s += " Use *Continue anyway* or *Cancel* on the progress message."
		} else {
			s += " Nothing is left to send."
		}
	case engine.EventPaused:
		s = fmt.Sprintf(":double_vertical_bar: Paused: %s sent; the remaining %s stay in %s, untouched.", msgs(r.Sent), msgs(rest), dlq)
	case engine.EventCancelled:
		s = fmt.Sprintf(":black_square_for_stop: Cancelled: %s sent; the remaining %s stay in %s, untouched.", msgs(r.Sent), msgs(rest), dlq)
		if r.Returned > 0 || r.Unseen != nil {
			// The copies sent before the cancel are watched for their
			// step's grace: what came back is counted after it.
			s += fmt.Sprintf(" Of those sent, %s.", cameBack(r.Returned, r.Unseen))
		}
	case engine.EventFinished:
		s = Outcome(r) + "; "
		if r.Missing == 0 { // else the missing lead counts them
			s += "0 missing, "
		}
		s += num(r.Failed) + " not delivered."
	case engine.EventWaiting:
		s = ":hourglass_flowing_sand: " + esc(oneLine(e.Text), 600)
	case engine.EventInterrupted:
		s = fmt.Sprintf(":zap: Interrupted: the process running it stopped. %s sent; the remaining %s are still in %s.", msgs(r.Sent), msgs(rest), dlq)
		if cmd := restCommand(command, r); cmd != "" {
			s += " Preview the rest: " + code(cmd, 600)
		}
	default:
		return ""
	}
	if d := missingLead(r); d != "" && e.Kind != engine.EventStepStarted && e.Kind != engine.EventStepPassed {
		s = d + " " + s
	}
	return clip(oneLine(s), maxLine)
}

// missingLead is the loud lead for a replay some of whose messages are
// gone: neither sent by dlqbot nor in the DLQ any more. It is "" when none
// are.
func missingLead(r engine.Replay) string {
	if r.Missing == 0 {
		return ""
	}
	return fmt.Sprintf(":rotating_light: *%s MISSING* — neither sent by dlqbot nor in %s any more: dlqbot did not send %s; something else took %s from the DLQ.",
		msgs(r.Missing), code(r.DLQ, 120), itThem(r.Missing), itThem(r.Missing))
}

// itThem is "it" for one, "them" otherwise.
func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// stepLine describes a finished step on one line, after lead ("Step 3
// passed"): how long it took, its counts, and what else the engine
// observed (stepExtra), each number once.
func stepLine(st *engine.StepResult, lead string) string {
	back := num(st.Returned) + " came back"
	if st.Unseen != nil {
		back = num(st.Returned) + " seen back, " + esc(st.Unseen.Words(), 300)
	}
	if st.Duration > 0 {
		lead += " in " + seconds(st.Duration)
	}
	s := fmt.Sprintf("%s — %s sent, %s settled, %s", lead, num(st.Sent), num(st.Settled), back)
	if st.Failed > 0 {
		s += fmt.Sprintf(", %s not delivered or missing", num(st.Failed))
	}
	if x := stepExtra(st); x != "" {
		s += ": " + esc(strings.TrimRight(oneLine(x), "."), 500)
	}
	return s + "."
}

// stepExtra is a step's observation without the clauses that restate the
// counts its line gives ("all 20 settled", "8 of 20 settled within 9s",
// "12 came back to orders.dlq", "none seen back in orders.dlq", the tap's
// window): what is left is what the engine saw besides, "" when nothing.
func stepExtra(st *engine.StepResult) string {
	whole := []string{fmt.Sprintf("all %d settled", st.Sent)}
	if st.Unseen != nil {
		whole = append(whole, st.Unseen.Words())
	}
	// Followed by one word: the settle window, or the DLQ's name.
	lead := []string{
		fmt.Sprintf("none of the %d settled within ", st.Sent),
		fmt.Sprintf("%d of %d settled within ", st.Settled, st.Sent),
		fmt.Sprintf("%d came back to ", st.Returned),
		"none seen back in ",
	}
	restates := func(c string) bool {
		if slices.Contains(whole, c) {
			return true
		}
		for _, l := range lead {
			if rest, ok := strings.CutPrefix(c, l); ok && !strings.Contains(rest, " ") {
				return true
			}
		}
		return false
	}
	var kept []string
	for _, c := range strings.Split(oneLine(st.Observation), "; ") {
		if strings.TrimSpace(c) != "" && !restates(c) {
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, "; ")
}

// firstOf returns the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// Activity returns the activity-channel line for an event, for a start,
// resume, pause, cancellation, stop, finish or interruption: which replay
// of which DLQ, its state in a word, the one count that matters for it
// (how many it replays, how far it got, how many came back) and who
// approved it; the thread has the rest, and the bot links it. It returns
// "" for step events, which stay in the thread.
func Activity(e engine.Event) string {
	r := e.Replay
	id := fmt.Sprintf("Replay %s of %s", code(r.ID, 60), code(r.DLQ, 120))
	sentOf := fmt.Sprintf("%s of %s sent", num(r.Sent), msgs(r.Total))
	var s string
	switch e.Kind {
	case engine.EventStarted:
		s = fmt.Sprintf(":arrow_forward: %s started: %s, requested by %s", id, msgs(r.Total), who(r.Requester))
	case engine.EventResumed:
		s = fmt.Sprintf(":arrow_forward: %s resumed: %s left to send", id, msgs(remaining(r)))
	case engine.EventPaused:
		s = fmt.Sprintf(":double_vertical_bar: %s paused: %s", id, sentOf)
	case engine.EventCancelled:
		s = fmt.Sprintf(":black_square_for_stop: %s cancelled: %s", id, sentOf) + backSoFar(r)
	case engine.EventStopped:
		s = fmt.Sprintf(":octagonal_sign: %s stopped", id)
		if e.Step != nil {
			s += " after step " + num(e.Step.Step)
		}
		switch why := firstOf(r.Note, e.Text); {
		case r.Returned > 0 || r.Unseen != nil:
			s += ": " + cameBackShort(r.Returned, r.Unseen)
		case why != "":
			s += ": " + esc(oneLine(why), 300)
		default:
			s += ": " + sentOf
		}
	case engine.EventFinished:
		s = fmt.Sprintf("%s %s %s", finishIcon(r), id, finishWords(r))
	case engine.EventInterrupted:
		s = fmt.Sprintf(":zap: %s interrupted: %s; the rest are still in the DLQ", id, sentOf)
	default:
		return ""
	}
	s += " · approved by " + who(r.Approver)
	if d := missingLead(r); d != "" && e.Kind != engine.EventStarted {
		s = d + " " + s
	}
	return clip(oneLine(s), maxLine)
}

// ActivityCheck returns the activity-channel line for a check report: how
// many of the replayed came back, how many were not seen in a dead-letter
// queue, new failures and those at the park limit.
func ActivityCheck(c engine.CheckReport) string {
	s := fmt.Sprintf(":mag: Check of replay %s of %s", code(c.ReplayID, 60), code(c.DLQ, 120))
	if c.Label != "" {
		s += " (follow-up " + esc(oneLine(c.Label), 20) + ")"
	}
	switch {
	case c.Unseen != nil:
		s += fmt.Sprintf(": %s of %s sent seen back; %s", num(c.Returned), num(c.Replayed), esc(c.Unseen.Words(), 300))
	case c.HeldByReplay != nil:
		// What was not read may hold copies back: no "not seen" count.
		s += fmt.Sprintf(": %s of %s sent seen back", num(c.Returned), num(c.Replayed))
	default:
		s += fmt.Sprintf(": %s of %s sent came back, %s not seen in a dead-letter queue",
			num(c.Returned), num(c.Replayed), num(max(c.Replayed-c.Returned, 0)))
	}
	if c.NewFailures > 0 {
		s += fmt.Sprintf("; %s since the replay began (without its id)", plural(c.NewFailures, "new failure", "new failures"))
	}
	if c.AtParkLimit > 0 {
		s += fmt.Sprintf("; %s at the park limit", num(c.AtParkLimit))
	}
	if h := c.HeldByReplay; h != nil {
		s += "; not read: " + esc(h.Words(), 200) + " (dlqbot's own read of the DLQ; check again once it ends)"
	}
	return clip(oneLine(s), maxLine)
}

// cameBack words n copies back, and, when u is set, for how many copies it
// could not be told (the tap was gone): never "0 came back" then.
func cameBack(n int, u *engine.Unseen) string {
	if u == nil {
		return num(n) + " came back"
	}
	return num(n) + " seen back, " + esc(u.Words(), 300)
}

// cameBackShort is cameBack without the window, for a step's line whose
// observation names it.
func cameBackShort(n int, u *engine.Unseen) string {
	if u == nil {
		return num(n) + " came back"
	}
	return fmt.Sprintf("%s seen back, could not tell for %s", num(n), num(u.Count))
}

// nominalStep is the size of step k (from 1) before what the plan holds:
// the first step's size, doubling up to the cap (engine's stepSize).
func nominalStep(p engine.Params, k int) int {
	n := p.Step
	for i := 1; i < k && n < p.Cap; i++ {
		n *= 2
	}
	return min(n, p.Cap)
}

// sizeWhy says why a step did not plan double the last one: the cap,
// what was left, or the first copies of targets and failure groups it
// reached ("" when it is the plain doubling, or the parameters are not
// known).
func sizeWhy(p engine.Params, st engine.StepResult) string {
	if st.Step < 1 || st.Planned <= 0 || p.Step <= 0 || p.Cap < p.Step {
		return ""
	}
	n := nominalStep(p, st.Step)
	switch {
	case st.Planned < n:
		return fmt.Sprintf(" (%s, not %s: only that many were left to send)", num(st.Planned), num(n))
	case st.Planned > n:
		return fmt.Sprintf(" (%s, not %s: one more for each target and failure group reached for the first time)", num(st.Planned), num(n))
	case st.Step > 1 && n < 2*nominalStep(p, st.Step-1):
		return fmt.Sprintf(" (%s: capped at cap=%s)", num(n), num(p.Cap))
	}
	return ""
}

// finishIcon is a finished replay's icon: the flag only when it finished
// clean.
func finishIcon(r engine.Replay) string {
	switch r.Verdict() {
	case engine.VerdictCameBack:
		return ":warning:"
	case engine.VerdictCouldNotTell:
		return ":grey_question:"
	}
	return ":checkered_flag:"
}

// finishWords is how a finished replay finished, with its one count:
// "finished clean: 400 sent", "finished — 12 of 32 came back", "finished —
// could not tell for 392 of 400 sent".
func finishWords(r engine.Replay) string {
	switch r.Verdict() {
	case engine.VerdictCameBack:
		return fmt.Sprintf("finished — %s of %s came back", num(r.Returned), num(r.Sent))
	case engine.VerdictCouldNotTell:
		if r.Unseen != nil {
			return fmt.Sprintf("finished — could not tell for %s of %s sent", num(r.Unseen.Count), num(r.Sent))
		}
		return "finished — could not tell"
	}
	return "finished clean: " + num(r.Sent) + " sent"
}
