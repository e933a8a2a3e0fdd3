package engine

import (
	"context"
	"fmt"
)

// window is the ledger window of a batch about to be published: fenced
// by the run's lease, refusing what other replays sent since the preview.
func (rn *run) window(batch []Moved) Window {
	return Window{ReplayID: rn.r.ID, DLQ: rn.r.DLQ, Owner: rn.owner, Epoch: rn.epoch, Since: rn.f.CreatedAt,
		Entries: rn.entries(batch, true), Resend: rn.resending}
}

// refused books the copies the ledger refused in a pass (another replay
// sent or is sending them since the preview) as that replay's: out of the
// plan and of the step's planned count, never sent, never missing.
func (rn *run) refused(mr MoveResult, res *StepResult) {
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
		rn.elsewhere(id, n[id], Claim{Replay: by[id], Sent: true})
	}
	res.Planned -= len(mr.Refused)
}

// eachLedgerPage reads replay id's ledger a page at a time
// (Ledger.EntriesPage), calling fn with each page in send order: no
// reader holds a large replay's whole ledger.
func (s *Service) eachLedgerPage(ctx context.Context, id string, fn func([]LedgerEntry) error) error {
	for from := int64(0); from >= 0; {
		page, next, err := s.d.Ledger.EntriesPage(ctx, id, from)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if next >= 0 && next <= from {
			return fmt.Errorf("ledger of %s: page at %d did not advance (%d)", id, from, next)
		}
		from = next
	}
	return nil
}

// pendingLedger returns replay id's copies in doubt (intents never
// confirmed nor withdrawn), read in pages.
func (s *Service) pendingLedger(ctx context.Context, id string) ([]LedgerEntry, error) {
	var out []LedgerEntry
	err := s.eachLedgerPage(ctx, id, func(page []LedgerEntry) error {
		out = append(out, pendingEntries(page)...)
		return nil
	})
	return out, err
}

// ledgerCounts counts replay id's confirmed sends and pending intents, read
// in pages; each, when set, is called with every entry (Pending tells an
// intent from a confirmed send).
func (s *Service) ledgerCounts(ctx context.Context, id string, each func(LedgerEntry)) (sent, pending int, err error) {
	err = s.eachLedgerPage(ctx, id, func(page []LedgerEntry) error {
		for _, e := range page {
			if e.Pending {
				pending++
			} else {
				sent++
			}
			if each != nil {
				each(e)
			}
		}
		return nil
	})
	return sent, pending, err
}
