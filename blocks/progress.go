package blocks

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Caps on the failures a progress message lists.
const (
	maxReturned    = 10 // messages that came back
	maxOtherFailed = 5  // messages not delivered or missing
	barWidth       = 10
)

// ProgressAs renders a replay's progress message, edited at each step: its
// state, a progress bar, what was sent, settled, came back,
// remains, went missing or was not delivered, the last step's observation,
// and the controls that still apply — Pause and Cancel while queued or
// running, Resume (for a stopped replay "Continue anyway") and Cancel while
// paused or stopped, none once finished, cancelled or interrupted. last may
// be nil. An interrupted replay's hint to preview the rest names the slash
// command command ("/dlq").
func ProgressAs(command string, r engine.Replay, last *engine.StepResult) ([]slack.Block, string) {
	return progress(r, last, "", command)
}

// ProgressEventAs renders the progress message as of an event, as
// ProgressAs(command, e.Replay, e.Step) does, except that for an
// interrupted replay it also shows the event's text, which lists the
// messages sent so far.
func ProgressEventAs(command string, e engine.Event) ([]slack.Block, string) {
	extra := ""
	if e.Kind == engine.EventInterrupted {
		extra = e.Text
	}
	return progress(e.Replay, e.Step, extra, command)
}

func progress(r engine.Replay, last *engine.StepResult, extra, command string) ([]slack.Block, string) {
	rest := remaining(r)
	head := fmt.Sprintf("*Replay* %s of %s · %s", code(r.ID, 60), code(r.DLQ, 300), verdictLabel(r))
	if r.Step > 0 {
		head += fmt.Sprintf(" · step %s", num(r.Step))
	}
	head += fmt.Sprintf("\n%s — %s of %s sent", bar(r.Total-rest, r.Total, barWidth), num(r.Sent), msgs(r.Total))
	// The four numbers every replay has; the others only when they are
	// not 0, so that the card stays short.
	fs := []string{"*Sent*\n" + num(r.Sent), "*Settled*\n" + num(r.Settled), cameBackField(r), "*Remaining*\n" + num(rest) + " still in the DLQ"}
	if r.Missing > 0 {
		fs = append(fs, "*Missing*\n"+num(r.Missing)+" gone from the DLQ since the preview")
	}
	if r.Failed > 0 {
		fs = append(fs, "*Not delivered*\n"+num(r.Failed)+" refused by the broker, originals kept")
	}
	if r.NewFailures > 0 {
		fs = append(fs, "*New failures during the replay*\n"+num(r.NewFailures)+" dead-lettered while it ran, without its id")
	}
	out := []slack.Block{section(head), fields(fs...)}
	if r.Pace != "" && r.State == engine.StateRunning {
		// What an auto-paced replay sends at and why (engine/pacer.go).
		out = append(out, section(":stopwatch: "+escape(r.Pace)))
	}
	if d := missingLead(r); d != "" {
		out = append(out[:1], append([]slack.Block{section(d)}, out[1:]...)...)
	}
	if r.InDoubt > 0 || r.Duplicates > 0 {
		out = append(out, section(fmt.Sprintf(":warning: *In doubt:* %s in flight when the broker connection was lost may or may not have been delivered, and %s could not be acked after their copies were confirmed (duplicates). %s; a plain resume never sends them again, *Resend in doubt* (`resume <replay> resend=in-doubt`) sends the ones in doubt again, marked `%s: true`.",
			plural(r.InDoubt, "copy", "copies"), plural(r.Duplicates, "original", "originals"), originalsKept(r), engine.PossibleDuplicateHeader)))
	}
	if r.Resent > 0 {
		out = append(out, section(fmt.Sprintf("*Resent:* %s in doubt sent again with `%s: true` and their first copy's message_id and `x-dlqbot-copy`: a consumer may have received each twice.",
			plural(r.Resent, "copy", "copies"), engine.PossibleDuplicateHeader)))
	}
	if last != nil {
		// A replay stopped by its last step says why in the stop line,
		// in the step's own words: the card says them once.
		said := ""
		if r.State == engine.StateStopped {
			said = r.Note
		}
		out = append(out, section(stepText(*last, r.Params, said)))
	}
	shown := r
	if last != nil && r.State == engine.StateStopped && r.Note == last.Observation {
		// The step line gives the step's counts: the stop line keeps what
		// else the step saw, and why it stopped.
		var why []string
		if last.Returned > 0 {
			why = append(why, "copies came back to "+r.DLQ)
		}
		if x := stepExtra(last); x != "" {
			why = append(why, x)
		}
		shown.Note = strings.Join(why, "; ")
	}
	if s := stateText(shown, rest, extra, command); s != "" {
		out = append(out, section(s))
	}
	if s := returnedText(r); s != "" {
		out = append(out, section(s))
	}
	if s := otherFailuresText(r); s != "" {
		out = append(out, section(s))
	}
	out = append(out, contextBlock("", paramsText(r)))
	if c := controls(r, rest); c != nil {
		out = append(out, c)
	}
	text := fmt.Sprintf("Replay %s of %s: %s — %s of %s sent, %s came back.",
		escape(r.ID), escape(r.DLQ), escape(string(r.State)), num(r.Sent), num(r.Total), num(r.Returned))
	if r.Missing > 0 {
		text = fmt.Sprintf("%s MISSING (dlqbot did not send them). ", msgs(r.Missing)) + text
	}
	return out, fallback(text)
}

// remaining is how many copies the replay has neither sent nor given up on.
func remaining(r engine.Replay) int {
	return max(r.Total-r.Sent-r.Failed-r.Missing-r.InDoubt, 0)
}

// stateLabel is a replay state with its icon.
func stateLabel(s engine.State) string {
	switch s {
	case engine.StateQueued:
		return ":hourglass_flowing_sand: *Queued*"
	case engine.StateRunning:
		return ":arrow_forward: *Running*"
	case engine.StatePaused:
		return ":double_vertical_bar: *Paused*"
	case engine.StateStopped:
		return ":octagonal_sign: *Stopped*"
	case engine.StateCancelled:
		return ":black_square_for_stop: *Cancelled*"
	case engine.StateFinished:
		return ":checkered_flag: *Finished*"
	case engine.StateInterrupted:
		return ":zap: *Interrupted*"
	}
	return "*" + esc(oneLine(string(s)), 30) + "*"
}

// verdictLabel is stateLabel, except that a replay that finished says
// whether it finished clean: one with copies back, or with copies nobody
// could see, never shows as a plain finish.
func verdictLabel(r engine.Replay) string {
	if r.State != engine.StateFinished {
		return stateLabel(r.State)
	}
	switch r.Verdict() {
	case engine.VerdictCameBack:
		return ":warning: *Finished — " + num(r.Returned) + " of " + num(r.Sent) + " came back*"
	case engine.VerdictCouldNotTell:
		return ":grey_question: *Finished — could not tell*"
	}
	return ":checkered_flag: *Finished clean*"
}

// stepText describes the last step: while it is sending, what it plans;
// afterwards, what it sent and observed (unless the card already says
// said, the same words); either way, when it is not the doubling of the
// last, why (sizeWhy).
func stepText(s engine.StepResult, p engine.Params, said string) string {
	if s.Sent == 0 && s.Observation == "" {
		return fmt.Sprintf("*Step %s* — sending %s…%s", num(s.Step), msgs(s.Planned), sizeWhy(p, s))
	}
	t := fmt.Sprintf("*Step %s*%s — sent %s of %s · %s settled · %s",
		num(s.Step), sizeWhy(p, s), num(s.Sent), num(s.Planned), num(s.Settled), cameBackShort(s.Returned, s.Unseen))
	if s.Failed > 0 {
		t += fmt.Sprintf(" · %s not delivered or missing", num(s.Failed))
	}
	if s.Duration > 0 {
		t += " · " + seconds(s.Duration)
	}
	if s.Observation != "" && s.Observation != said {
		t += "\n_" + esc(oneLine(s.Observation), 1000) + "_"
	}
	return t
}

// stateText explains a state that needs explaining, with the record's note.
func stateText(r engine.Replay, rest int, extra, command string) string {
	dlq := code(r.DLQ, 300)
	note := ""
	if r.Note != "" {
		note = " — " + esc(oneLine(r.Note), 1000)
	}
	switch r.State {
	case engine.StateQueued:
		return ":hourglass_flowing_sand: Waiting for a worker to start it."
	case engine.StatePaused:
		return fmt.Sprintf(":double_vertical_bar: *Paused*%s. The remaining %s stay in %s, untouched, until it is resumed.", note, msgs(rest), dlq)
	case engine.StateStopped:
		if rest == 0 {
			return fmt.Sprintf(":octagonal_sign: *Stopped by itself*%s. Nothing is left to send; *Cancel* ends it.", note)
		}
		return fmt.Sprintf(":octagonal_sign: *Stopped by itself*%s. *Continue anyway* sends the next step regardless; *Cancel* leaves the remaining %s in %s, untouched.", note, msgs(rest), dlq)
	case engine.StateCancelled:
		return fmt.Sprintf(":black_square_for_stop: *Cancelled* after %s were sent. The remaining %s stay in %s, untouched.", msgs(r.Sent), msgs(rest), dlq)
	case engine.StateFinished:
		return Outcome(r) + ". Follow-up checks will report whether any come back later."
	case engine.StateInterrupted:
		return interruptedText(r, rest, extra, command)
	case engine.StateRunning:
		if r.Note != "" {
			// Only a run waiting for the broker after losing its node
			// writes a note while it runs (engine/reconnect.go).
			return ":hourglass_flowing_sand: *Waiting*" + note + "."
		}
	}
	return ""
}

// interruptedText says what an interrupted replay sent, that the rest is
// still in the DLQ, and how to preview the rest (with command, the slash
// command's name).
func interruptedText(r engine.Replay, rest int, extra, command string) string {
	s := fmt.Sprintf(":zap: *Interrupted*: the process running this replay stopped without handing it over. %s %s sent; the remaining %s are still in %s, untouched. Nothing resumes it automatically.",
		msgs(r.Sent), wasWere(r.Sent), msgs(rest), code(r.DLQ, 300))
	if d := strings.TrimSpace(extra); d != "" {
		s += "\n" + esc(oneLine(d), 1500)
	} else if d := strings.TrimSpace(r.Note); d != "" {
		s += "\n" + esc(oneLine(d), 1000)
	}
	if cmd := restCommand(command, r); cmd != "" {
		s += "\nTo replay the rest, preview it again: " + code(cmd, 600)
	} else {
		s += fmt.Sprintf("\nTo replay the rest, preview %s again with the original selection.", code(r.DLQ, 300))
	}
	return s
}

// restCommand is the command that previews the rest of an interrupted
// replay ("/dlq preview orders.dlq reason=rejected"), "" when its
// selection is unknown.
func restCommand(command string, r engine.Replay) string {
	if r.RestSelection == "" {
		return ""
	}
	return command + " preview " + oneLine(r.RestSelection)
}

// returnedText lists the messages that came back and why.
func returnedText(r engine.Replay) string {
	var lines []string
	n := 0
	for _, f := range r.Failures {
		if f.Kind != engine.FailureReturned {
			continue
		}
		if n < maxReturned {
			lines = append(lines, failureLine(f))
		}
		n++
	}
	if n == 0 {
		return ""
	}
	total := max(n, r.Returned)
	// The Came back field says that they carry this replay's id.
	head := fmt.Sprintf("*Came back* (%s)", msgs(total))
	return list(head, lines, total, MaxSectionText, func(h int) string {
		return "…and " + plural(h, "more", "more")
	})
}

// otherFailuresText lists messages that were not delivered or went missing.
func otherFailuresText(r engine.Replay) string {
	var lines []string
	n := 0
	for _, f := range r.Failures {
		if f.Kind == engine.FailureReturned {
			continue
		}
		if n < maxOtherFailed {
			lines = append(lines, failureLine(f))
		}
		n++
	}
	if n == 0 {
		return ""
	}
	head := fmt.Sprintf("*Not delivered or missing* (%s not delivered, %s missing; their originals stay in the DLQ)", num(r.Failed), num(r.Missing))
	if r.Missing > 0 && r.Failed == 0 {
		head = fmt.Sprintf("*Missing* (%s gone from the DLQ since the preview)", msgs(r.Missing))
	}
	return list(head, lines, n, MaxSectionText, func(h int) string {
		return "…and " + plural(h, "more", "more")
	})
}

// failureLine describes one failure: id, target, kind or reason, and the
// broker's detail of a copy not delivered. A returned copy's detail is its
// exception text, which the progress message (posted in a channel) never
// shows: `check` shows it to a reader.
func failureLine(f engine.Failure) string {
	s := "• " + code(f.ID, 40)
	if f.Target != "" {
		s += " → " + code(f.Target, 80)
	}
	why := f.Reason
	if f.Kind != engine.FailureReturned {
		why = strings.ReplaceAll(string(f.Kind), "_", " ")
		if f.Reason != "" {
			why += ", " + f.Reason
		}
	}
	if why != "" {
		s += " — *" + esc(oneLine(why), 60) + "*"
	}
	if f.Detail != "" && f.Kind != engine.FailureReturned {
		s += ": " + code(f.Detail, 200)
	}
	return s
}

// paramsText says who approved the replay and how it paces.
func paramsText(r engine.Replay) string {
	p := r.Params
	s := fmt.Sprintf("Approved by %s · requested by %s · first step %s, doubling up to %s · %s · step timeout %s",
		who(r.Approver), who(r.Requester), num(p.Step), num(p.Cap), paceText(p), p.Timeout)
	if !r.CreatedAt.IsZero() {
		s += " · started " + date(r.CreatedAt)
	}
	if !r.EndedAt.IsZero() {
		s += " · ended " + date(r.EndedAt)
	}
	return s
}

// controls returns the buttons that still apply to r, or nil.
func controls(r engine.Replay, rest int) slack.Block {
	leaves := fmt.Sprintf("Nothing more will be sent. %s sent so far stay sent; the remaining %s stay in the DLQ, untouched.", msgs(r.Sent), msgs(rest))
	switch {
	case r.Sent == 0:
		leaves = fmt.Sprintf("Nothing will be sent: the %s stay in the DLQ, untouched.", msgs(rest))
	case rest == 0:
		leaves = fmt.Sprintf("Nothing is left to send: the replay ends as cancelled. %s sent stay sent.", msgs(r.Sent))
	}
	cancel := button(ActionCancel, r.ID, "Cancel", slack.StyleDanger,
		confirm("Cancel the replay?", leaves, "Cancel replay", "Keep it", slack.StyleDanger))
	var resend []*slack.ButtonBlockElement
	if r.InDoubt > 0 && (r.State == engine.StatePaused || r.State == engine.StateStopped) {
		resend = append(resend, button(ActionResend, r.ID, "Resend in doubt", "",
			confirm("Send the copies in doubt again?",
				fmt.Sprintf("%s may or may not have reached their target. Each is sent again, with its message_id and %s: true, so a consumer may see it twice. Then the replay continues.", msgs(r.InDoubt), engine.PossibleDuplicateHeader),
				"Resend", "Not yet", slack.StyleDanger)))
	}
	switch r.State {
	case engine.StateQueued, engine.StateRunning:
		return actions(BlockProgressControls, button(ActionPause, r.ID, "Pause", "", nil), cancel)
	case engine.StatePaused:
		return actions(BlockProgressControls, append([]*slack.ButtonBlockElement{button(ActionResume, r.ID, "Resume", slack.StylePrimary, nil)}, append(resend, cancel)...)...)
	case engine.StateStopped:
		if rest == 0 {
			// Continuing would send nothing: no button that does nothing.
			return actions(BlockProgressControls, append(resend, cancel)...)
		}
		why := msgs(r.Returned) + " came back."
		if r.Returned == 0 {
			why = "The last step was not seen to settle in time."
		}
		return actions(BlockProgressControls, append([]*slack.ButtonBlockElement{
			button(ActionResume, r.ID, "Continue anyway", "",
				confirm("Continue despite this?",
					why+fmt.Sprintf(" Continuing sends the next canary step of the remaining %s.", msgs(rest)),
					"Continue", "Not yet", slack.StyleDanger))}, append(resend, cancel)...)...)
	}
	return nil
}

// cameBackField is the progress field of the copies that came back, or,
// when the tap was gone and the DLQ could not be re-read, of those seen
// back and those nobody could see.
func cameBackField(r engine.Replay) string {
	if r.Unseen == nil {
		return "*Came back*\n" + num(r.Returned) + " with this replay's id"
	}
	return fmt.Sprintf("*Came back*\n%s seen; could not tell for %s (no tap from %s to %s)",
		num(r.Returned), num(r.Unseen.Count), dateSecs(r.Unseen.From), untilText(r.Unseen.To))
}

// untilText is the end of a window without the tap: its time, or "now"
// while the tap is still gone.
func untilText(t time.Time) string {
	if t.IsZero() {
		return "now"
	}
	return dateSecs(t)
}

// dateSecs is date to the second: a window without the tap is often
// shorter than a minute.
func dateSecs(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time_secs}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// originalsKept says what the DLQ holds of the originals of a replay's
// copies in doubt and duplicates: what its last count found, and whether
// something else took some of them since or may have.
func originalsKept(r engine.Replay) string {
	s := "Those originals stay in the DLQ and are listed in its ledger"
	if taken := min(r.InDoubtTaken, r.InDoubt); taken > 0 {
		s += fmt.Sprintf(", but for %s in doubt something else took the original from the DLQ, so those cannot be sent again", plural(taken, "copy", "copies"))
	}
	if r.CountStale {
		s += " (at the last count: another reader may have taken some since)"
	}
	return s
}
