package replay

import (
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// duplicatesNote words the copies a consumer may have received twice:
// certain duplicates (their originals stayed in the DLQ) and copies in
// doubt sent again. It is "" when there are none.
func duplicatesNote(r engine.Replay) string {
	s := ""
	if r.Duplicates > 0 {
		s += fmt.Sprintf("; %d duplicate(s): delivered, their originals also still in %s%s", r.Duplicates, r.DLQ, engine.LastCount(r))
	}
	if r.DuplicatesAcked > 0 {
		s += fmt.Sprintf("; %d original(s) of copies delivered before a lost connection acked from %s afterwards (never sent again)", r.DuplicatesAcked, r.DLQ)
	}
	if r.Resent > 0 {
		s += fmt.Sprintf("; %d copy(ies) in doubt sent again with %s: true (a consumer may have received them twice)", r.Resent, engine.PossibleDuplicateHeader)
	}
	return s
}

// nothingSent words a step none of whose copies was sent.
func (rn *run) nothingSent(res engine.StepResult) string {
	kinds := map[engine.FailureKind]int{}
	for _, f := range rn.r.Failures {
		kinds[f.Kind]++
	}
	s := fmt.Sprintf("none of the %d message(s) of step %d was sent", res.Planned, res.Step)
	var why []string
	for _, k := range []engine.FailureKind{engine.FailureUnroutable, engine.FailureNacked, engine.FailureRefused, engine.FailureMissing, engine.FailureInDoubt} {
		if kinds[k] > 0 {
			why = append(why, fmt.Sprintf("%d %s", kinds[k], strings.ReplaceAll(string(k), "_", " ")))
		}
	}
	if len(why) > 0 {
		s += " (so far in this replay: " + strings.Join(why, ", ") + ")"
	}
	return s + "; the originals that could be kept are still in " + rn.r.DLQ
}
