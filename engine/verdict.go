package engine

import (
	"encoding/json"
	"strings"
)

// ReplayVerdict is what a replay's copies did, told beside its State (these
// exact words appear in the API, the JSON output and the terminal: keep
// them).
type ReplayVerdict string

// Replay verdicts.
const (
	// VerdictClean: every copy sent settled and none came back.
	VerdictClean ReplayVerdict = "clean"
	// VerdictCameBack: some copies came back (dead-lettered with the
	// replay's id).
	VerdictCameBack ReplayVerdict = "came_back"
	// VerdictCouldNotTell: for some copies sent nobody could see whether
	// they came back (the tap was gone and the DLQ could not be re-read,
	// the tap's record of returns was changed in Redis, copies were in
	// doubt, or copies sent never settled).
	VerdictCouldNotTell ReplayVerdict = "could_not_tell"
)

// Verdict tells what r's copies did so far. Came back wins over could not
// tell (a copy that came back is known); a replay still sending, or paused,
// is clean while nothing came back and nothing was unseen, since copies
// not yet settled may still settle; one that ended or stopped with copies
// never seen to settle could not tell. Every front end shows this
// one verdict; none derives its own.
func (r Replay) Verdict() ReplayVerdict {
	switch {
	case r.Returned > 0:
		return VerdictCameBack
	case r.Unseen != nil, r.InDoubt > 0, r.ReturnsUnverified != "":
		return VerdictCouldNotTell
	case r.State == StateStopped && strings.Contains(r.Note, "could not tell"):
		return VerdictCouldNotTell
	case (r.State.Terminal() || r.State == StateStopped) && r.Settled < r.Sent:
		// Ended or stopped (a step that did not settle in time) with
		// copies never seen to settle: nobody knows what they did.
		return VerdictCouldNotTell
	}
	return VerdictClean
}

// Clean reports whether r finished with every copy settled and none back:
// the only outcome the terminal's replay and resume exit 0 for.
func (r Replay) Clean() bool {
	return r.State == StateFinished && r.Verdict() == VerdictClean
}

// MarshalJSON writes r with its verdict beside its state, so that every
// JSON document of a replay (status, API, MCP, the stored record) carries
// the one Verdict. Reading ignores "verdict": it is derived, never trusted.
func (r Replay) MarshalJSON() ([]byte, error) {
	type plain Replay
	v := r.Verdict()
	if r.Unverifiable {
		v = "" // nothing of it is to be trusted
	}
	return json.Marshal(struct {
		plain
		Verdict ReplayVerdict `json:"verdict,omitempty"`
	}{plain(r), v})
}
