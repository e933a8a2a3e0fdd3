package testkit

import (
	"context"
	"sync"

	"github.com/stroma/dlqbot/audit"
)

// Trail is an audit.Recorder in memory, for tests that check what the
// operations layer recorded. It is safe for concurrent use.
type Trail struct {
	mu      sync.Mutex
	entries []audit.Entry
}

var _ audit.Recorder = (*Trail)(nil)

// Record appends e.
func (t *Trail) Record(_ context.Context, e audit.Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entries = append(t.entries, e)
	return nil
}

// Find returns the entries of op (any when "") with outcome (any when
// "") from front end fe (any when ""), in order.
func (t *Trail) Find(fe, op, outcome string) []audit.Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []audit.Entry
	for _, e := range t.entries {
		if (fe == "" || e.FrontEnd == fe) && (op == "" || e.Op == op) && (outcome == "" || e.Outcome == outcome) {
			out = append(out, e)
		}
	}
	return out
}

// Last returns the latest outcome of op from front end fe (an entry that
// is not audit.OutcomeBegun), and how many there are: an operation that
// changes something is announced as begun before its outcome is known.
func (t *Trail) Last(fe, op string) (audit.Entry, int) {
	var es []audit.Entry
	for _, e := range t.Find(fe, op, "") {
		if e.Outcome != audit.OutcomeBegun {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		return audit.Entry{}, 0
	}
	return es[len(es)-1], len(es)
}

// Decision is an entry's outcome as a table cell: "ok" or its code.
func Decision(e audit.Entry) string {
	if e.Outcome == audit.OutcomeOK {
		return "ok"
	}
	return e.Code
}
