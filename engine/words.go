package engine

import (
	"fmt"
)

// The words a run ends with: why a replay did not finish, and what it
// says of duplicates, copies in doubt and messages other replays sent.

// Shortfall words why a replay whose plan is exhausted did not finish:
// how many of its messages are missing (neither sent by dlqbot nor still in
// the DLQ) first, then those not delivered (still in the DLQ) and those in
// doubt. It is "" for a replay that sent everything.
func Shortfall(r Replay) string {
	if r.Sent+r.Elsewhere >= r.Total && r.Missing == 0 {
		return ""
	}
	s := fmt.Sprintf("not finished: %d of %d sent", r.Sent, r.Total) + ElsewhereNote(r)
	if r.Missing > 0 {
		s += fmt.Sprintf("; %d MISSING — neither sent by dlqbot nor in %s any more (dlqbot did not send them; something else took them from the DLQ)", r.Missing, r.DLQ)
	}
	if r.Failed > 0 {
		s += fmt.Sprintf("; %d not delivered (the broker refused them; their originals stay in %s)", r.Failed, r.DLQ)
	}
	if r.InDoubt > 0 {
		kept := "originals stay in " + r.DLQ + LastCount(r)
		if taken := min(r.InDoubtTaken, r.InDoubt); taken > 0 {
			kept = fmt.Sprintf("originals stay in %s, but for %d of them something else took the original from it", r.DLQ, taken)
		}
		s += fmt.Sprintf("; %d in doubt (in flight when the connection was lost: maybe delivered; %s; resume with resend=in-doubt to send them again, marked %s: true)", r.InDoubt, kept, PossibleDuplicateHeader)
	}
	return s
}

// elsewhereNote words the previewed messages other dlqbot replays sent,
// are sending or own, naming them ("" when none); see elsewhereWords.
func ElsewhereNote(r Replay) string { return elsewhereWords(r) }

// lastCount qualifies what the replay says the DLQ holds of the originals
// of its duplicates and copies in doubt when that is only what the last
// count found (Replay.CountStale).
func LastCount(r Replay) string {
	if r.CountStale {
		return " (at the last count: another reader may have taken some since)"
	}
	return ""
}
