package ops

import (
	"context"
	"errors"
	"testing"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/audit"
)

// refusingTrail is an audit trail that can take no entry from "alice"
// (store.Audit.Writable, past the rate, is tested against Redis in
// package store).
type refusingTrail struct{ audit.Nop }

func (refusingTrail) Writable(_ context.Context, principal string) error {
	if principal == "alice" {
		return errors.New("too many audit entries")
	}
	return nil
}

// TestAdmitRefusesWhatCannotBeRecorded: an operation whose entry the
// trail cannot take is refused unavailable before anything is done;
// another principal's is admitted, and a trail that cannot tell admits.
func TestAdmitRefusesWhatCannotBeRecorded(t *testing.T) {
	t.Parallel()
	o := &Ops{d: Deps{Audit: refusingTrail{}}, log: zerolog.Nop()}
	ctx := context.Background()
	err := o.admit(ctx, Caller{Principal: "alice", Identity: "api:alice", FrontEnd: "api"})
	if r, ok := IsRefusal(err); !ok || r.Code != Unavailable {
		t.Fatalf("alice: %v, want refused unavailable", err)
	}
	if err := o.admit(ctx, Caller{Principal: "bob", Identity: "api:bob", FrontEnd: "api"}); err != nil {
		t.Fatalf("bob: %v", err)
	}
	o.d.Audit = audit.Nop{}
	if err := o.admit(ctx, Caller{Principal: "alice", Identity: "api:alice", FrontEnd: "api"}); err != nil {
		t.Fatalf("a trail that cannot tell: %v", err)
	}
}
