package engine

import (
	"context"
	"fmt"
)

// ReturnsView tells a preview's reader how a replay of it would find the
// copies that come back.
type ReturnsView struct {
	// Mode is "tap" or "reread".
	Mode ReturnsMode `json:"mode"`
	// Tap is the tap queue's name (tap mode).
	Tap string `json:"tap,omitempty"`
	// Reads is how many reads of the whole DLQ a replay of the selection
	// with the default steps needs to find returns (reread mode) at most:
	// one per step where the replay's cursor cannot tell (settle_tail.go).
	Reads int `json:"reads,omitempty"`
	// Detail says it in words, with why the DLQ must be re-read.
	Detail string `json:"detail"`
}

// returnsView works out p's ReturnsView. It changes nothing: the tap is
// declared by the replay, before its first publish.
func (s *Service) returnsView(ctx context.Context, p *Preview) ReturnsView {
	v := ReturnsView{Mode: ReturnsReread}
	reason := "this bot has no tap support configured"
	if s.tapping() {
		st, err := s.d.Taps.TapState(ctx, p.DLQ.Name)
		switch {
		case err != nil:
			reason = "the DLQ's bindings could not be read: " + err.Error()
		case st.Mode == ReturnsTap:
			v.Mode, v.Tap = ReturnsTap, st.Queue
			v.Detail = fmt.Sprintf("returns will be found through the tap queue %s, which receives every dead letter routed to %s: the DLQ is not re-read", st.Queue, p.DLQ.Name)
			return v
		default:
			reason = st.Reason
		}
	}
	v.Reads = defaultSteps(p.Selected)
	v.Detail = fmt.Sprintf("returns will be found by re-reading the DLQ: %d read(s) of all of %s (one per step), each giving every message back", v.Reads, p.DLQ.Name)
	if p.Selected <= tailKeep {
		// Reads is the worst case: the cursor's tail (settle_tail.go)
		// makes none while it can tell.
		v.Detail = "returns will be found at the DLQ's tail by the replay's own read of it, which holds what it passed unacked until the replay ends; only where that read cannot tell (another consumer on the DLQ, another dlqbot replay reading it) by " + v.Detail[len("returns will be found by "):]
	}
	if p.DLQ.Type == "quorum" {
		v.Detail += " and costing it a delivery attempt"
	}
	v.Detail += "; " + reason + ". Bind the DLQ to a dead-letter exchange to avoid the re-reads"
	return v
}

// defaultSteps is how many canary steps a replay of n messages takes with
// the default step and cap.
func defaultSteps(n int) int {
	steps := 0
	for sent := 0; sent < n; {
		steps++
		sent += stepSize(DefaultStep, DefaultCap, steps)
	}
	return steps
}
