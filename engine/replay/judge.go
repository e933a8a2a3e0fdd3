package replay

import (
	"sync/atomic"

	"github.com/stroma/dlqbot/engine"
)

// judge decides each step: whether its copies settled, came back or
// cannot be told (settle.go), on which evidence (settle_proof.go,
// settle_noack.go, settle_api.go), whether the next step may send before
// it is decided (settle_overlap.go, settle_breaker.go), and what happens to
// steps left undecided (settle_unjudged.go, settle_unverified.go).
type judge struct {
	runPart
	// pending is the step sent and not judged yet while the next one
	// sends (settle_overlap.go), tripped the breaker's verdict on the step
	// sending beside it (settle_breaker.go), and proofs what the targets'
	// counters can prove (settle_proof.go).
	pending *sentStep
	tripped atomic.Bool
	proofs  map[string]*targetProof
	// noAckAt is, per target of the step being sent, whether the consumer
	// list read before its sends showed only consumers that auto-ack
	// (settle_noack.go).
	noAckAt map[string]bool
	// apiDown counts the reads of management counters that failed
	// because the API is not answering, and apiMark is its value when the
	// step being sent sampled its targets (settle_api.go).
	apiDown atomic.Int64
	apiMark int64
	// open are the steps sent and not judged yet, by number; rest is what
	// judging the copies still unsettled when the plan was exhausted
	// found; winding is set while a cancelled run watches the copies it
	// sent (settle_unjudged.go).
	open    map[int]*sentStep
	rest    *engine.StepResult
	winding atomic.Bool
}
