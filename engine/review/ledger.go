package review

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
)

// eachLedgerPage reads replay id's ledger a page at a time
// (Ledger.EntriesPage), calling fn with each page in send order: no
// reader holds a large replay's whole ledger.
func (s *Base) EachLedgerPage(ctx context.Context, id string, fn func([]engine.LedgerEntry) error) error {
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

// ledgerCounts counts replay id's confirmed sends and pending intents, read
// in pages; each, when set, is called with every entry (Pending tells an
// intent from a confirmed send).
func (s *Base) LedgerCounts(ctx context.Context, id string, each func(engine.LedgerEntry)) (sent, pending int, err error) {
	err = s.EachLedgerPage(ctx, id, func(page []engine.LedgerEntry) error {
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
