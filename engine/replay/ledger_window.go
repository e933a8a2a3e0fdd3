package replay

import (
	"context"

	"github.com/stroma/dlqbot/engine"
)

// window is the ledger window of a batch about to be published: fenced
// by the run's lease, refusing what other replays sent since the preview.
func (rn *run) window(batch []engine.Moved) engine.Window {
	return engine.Window{ReplayID: rn.r.ID, DLQ: rn.r.DLQ, Owner: rn.owner, Epoch: rn.epoch, Since: rn.f.CreatedAt,
		Entries: rn.entries(batch, true), Resend: rn.rec.resending}
}

// refused books the copies the ledger refused in a pass (another replay
// sent or is sending them since the preview) as that replay's: out of the
// plan and of the step's planned count, never sent, never missing.
func (rn *run) refused(mr engine.MoveResult, res *engine.StepResult) {
	if len(mr.Refused) == 0 {
		return
	}
	n := map[string]int{}
	by := map[string]string{}
	var order []string
	for _, rf := range mr.Refused {
		if n[rf.ID] == 0 {
			order = append(order, rf.ID)
			by[rf.ID] = rf.By
		}
		n[rf.ID]++
	}
	for _, id := range order {
		rn.own.elsewhere(id, n[id], engine.Claim{Replay: by[id], Sent: true})
	}
	res.Planned -= len(mr.Refused)
}

// pendingLedger returns replay id's copies in doubt (intents never
// confirmed nor withdrawn), read in pages.
func (s *Service) pendingLedger(ctx context.Context, id string) ([]engine.LedgerEntry, error) {
	var out []engine.LedgerEntry
	err := s.base.EachLedgerPage(ctx, id, func(page []engine.LedgerEntry) error {
		out = append(out, pendingEntries(page)...)
		return nil
	})
	return out, err
}
