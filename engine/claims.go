package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// claimTTL bounds a step's claim on its messages: a run that dies without
// releasing them blocks other replays of the same messages this long at most.
const claimTTL = 15 * time.Minute

// claim claims the step's picked ids for this replay (Deps.Claims) and
// takes out of pick, and out of the plan, those another replay sent or
// is sending: counted in Replay.Elsewhere and named, never missing.
func (rn *run) claim(ctx context.Context, pick map[string]int) error {
	if rn.s.d.Claims == nil || len(pick) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pick))
	for id := range pick {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	refused, err := rn.s.d.Claims.Claim(ctx, rn.r.DLQ, rn.r.ID, ids, rn.r.CreatedAt, claimTTL)
	if err != nil {
		return fmt.Errorf("claim step messages: %w", err)
	}
	rn.claimed = rn.claimed[:0]
	for _, id := range ids {
		if cl, ok := refused[id]; ok {
			rn.elsewhere(id, pick[id], cl)
			delete(pick, id)
			continue
		}
		rn.claimed = append(rn.claimed, id)
	}
	return nil
}

// elsewhere books n copies of id as another replay's (cl).
func (rn *run) elsewhere(id string, n int, cl Claim) {
	rn.plan.drop(id, n)
	rn.r.Elsewhere += n
	rn.fail(Failure{ID: id, Target: rn.plan.target(id), Kind: FailureReplayedElsewhere, Detail: cl.words()})
}

// words says who holds a message: "replayed by r_…" or "being replayed by r_…".
func (cl Claim) words() string {
	if cl.Sent {
		return "replayed by " + cl.Replay + " (another dlqbot replay sent it; not sent again)"
	}
	return "being replayed by " + cl.Replay + " (another dlqbot replay claimed it for the step it is sending; not sent by this one)"
}

// settleClaims ends the step's claims: what it sent (or may have sent)
// stays this replay's as sent, the rest is released for others.
func (rn *run) settleClaims(ctx context.Context, sent map[string]bool) {
	if rn.s.d.Claims == nil || len(rn.claimed) == 0 {
		return
	}
	var done, released []string
	for _, id := range rn.claimed {
		if sent[id] {
			done = append(done, id)
		} else {
			released = append(released, id)
		}
	}
	rn.claimed = rn.claimed[:0]
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := rn.s.d.Claims.Settle(sctx, rn.r.DLQ, rn.r.ID, done, released); err != nil {
		// Claims left behind expire after claimTTL; the ledger holds the truth.
		rn.warn("settle claims", err)
	}
}

// heldBy names the dlqbot replays reading the DLQ now, for a "held by
// another client" note ("" when none is known).
func (rn *run) heldBy(ctx context.Context) string {
	if rn.s.d.Claims == nil {
		return ""
	}
	rs, err := rn.s.d.Claims.Readers(ctx, rn.r.DLQ, rn.r.ID)
	if err != nil || len(rs) == 0 {
		return ""
	}
	return " (dlqbot replay " + strings.Join(rs, ", ") + " is sending from it)"
}

// others takes out of pick what another replay holds now, before it could
// be called missing: reports how many copies it took.
func (rn *run) others(ctx context.Context, pick map[string]int) int {
	if rn.s.d.Claims == nil {
		return 0
	}
	var ids []string
	for id, n := range pick {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	h, err := rn.s.d.Claims.Holders(ctx, rn.r.DLQ, rn.r.ID, ids)
	if err != nil {
		rn.warn("claim holders", err)
		return 0
	}
	took := 0
	for id, cl := range h {
		rn.elsewhere(id, pick[id], cl)
		took += pick[id]
		pick[id] = 0
	}
	return took
}
