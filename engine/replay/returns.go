package replay

import (
	"github.com/stroma/dlqbot/engine"
)

// returnsFinder finds the copies that came back to the DLQ: by the tap
// (tapper.go, tap_watch.go, settle_returns.go), by the cursor's tail
// (settle_tail.go) or by re-reading the DLQ (settle_scan.go), and checks
// that no copy came back past the tap or the cursor unseen (the bypass
// check, settle_bypass.go).
type returnsFinder struct {
	runPart
	// returnedSeen are returned copies already counted, id → copies.
	returnedSeen map[string]int
	// mode is how this run finds returns, and modeNote why it re-reads.
	mode     engine.ReturnsMode
	modeNote string
	// tapTotal is the replay's returns recorded by the tap at the last
	// look; listed is how many returned events are in r.Failures.
	tapTotal int
	listed   int
	// watch follows the tap (tap_watch.go); gapExtra counts the returns
	// found by re-reading the DLQ after windows without the tap.
	watch    *tapWatch
	gapExtra int
	// tail is what the cursor saw of the replay's returns (settle_tail.go).
	tail curTail
	// dlqType is the DLQ's queue type once the run has seen it ("" until
	// then; settle_tail.go: only a classic DLQ's replay without a tap uses
	// a cursor).
	dlqType     string
	scanReplays []string // the replays that held messages during the last re-read (settle_scan.go)
	// bp is the baseline of the tap-bypass check (settle_bypass.go).
	bp bypassBase
}
