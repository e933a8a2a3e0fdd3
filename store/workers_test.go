package store

import (
	"slices"
	"testing"
	"time"
)

func TestWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.st.Workers()
	if ids, err := w.List(e.ctx); err != nil || len(ids) != 0 {
		t.Errorf("no workers: %v %v", ids, err)
	}
	if err := w.Announce(e.ctx, "long", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := w.Announce(e.ctx, "short", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := w.Announce(e.ctx, "gone", time.Minute); err != nil {
		t.Fatal(err)
	}
	ids, err := w.List(e.ctx)
	if err != nil || len(ids) != 3 {
		t.Fatalf("workers: %v %v", ids, err)
	}
	if err := w.Withdraw(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "short announcement to expire", func() bool {
		ids, err := w.List(e.ctx)
		return err == nil && slices.Equal(ids, []string{"long"})
	})
}
