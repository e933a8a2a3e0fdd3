package replay

import (
	"sync"
	"time"
)

// ownership is a run's share of its DLQ with other readers: the ids it
// claims before it sends them (claims.go), its reading mark and what it
// learns from the other replays' and scans' marks (readers.go), and giving
// way to a replay that seeks what its cursor holds (giveway.go).
type ownership struct {
	runPart
	// claimed are the ids this step claimed (Deps.Claims).
	claimed []string
	// heldNote names who held messages of the DLQ when the last step
	// found messages held elsewhere (heldBy); heldLanded says that step's
	// whole reads kept finding messages reach the DLQ that they had not
	// seen (findRest).
	heldNote   string
	heldLanded bool
	// sawReaders are the other dlqbot replays, and sawScans the dlqbot
	// previews, approvals and checks ("a preview of U123"), a step looking
	// for its picks (findRest) has seen reading the DLQ (readerWait),
	// while it looks: heldBy names them when they ended before it gave up.
	sawReaders, sawScans []string
	// curHeld is how many messages the cursor held at the last step's end,
	// for the run's reading mark (markReading).
	curHeld int
	// marked is when the run last marked itself reading the DLQ (and
	// looked for replays seeking what its cursor holds, readers.go).
	marked time.Time
	// markedSeeking is whether that mark said seeking.
	markedSeeking bool
	// markMu guards mark, the reading mark as the run last wrote it (on
	// false once removed), which keepMarked refreshes from its own
	// goroutine; markMu is held while a mark is written, so a refresh
	// never brings back a mark the run removed.
	markMu sync.Mutex
	mark   readMark
	// seeking is set while a step looks for picks it did not find
	// (findRest); yieldLooked is when a move last looked for seekers to
	// give way to, yieldTo those it found, and deaf the seekers it waited
	// for in vain, given way to no more until they stop seeking
	// (giveway.go).
	seeking     bool
	passPaced   bool // the pass under way sends paced (giveway.go)
	yieldLooked time.Time
	yieldTo     []string
	deaf        map[string]bool
}
