package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/clustertest"
)

// windowOf is w with one entry per id, copy tags prefix-1, prefix-2, ….
func windowOf(w engine.Window, prefix string, ids ...string) engine.Window {
	w.Entries = nil
	for i, id := range ids {
		w.Entries = append(w.Entries, copyOf(entry(w.ReplayID, id, i+1), fmt.Sprintf("%s-%d", prefix, i+1)))
	}
	return w
}

// checkWindows runs the window tests against one store.
func checkWindows(t *testing.T, e *testEnv) {
	l := e.st.Ledger()
	a := lease(t, e, "r_a")
	b := lease(t, e, "r_b") // b's preview, like a's, is before a sends
	e.clock.Advance(time.Second)
	if refused, err := l.IntendWindow(e.ctx, windowOf(a, "ma", "x", "y", "z")); err != nil || len(refused) != 0 {
		t.Fatalf("a's window: %v %v", refused, err)
	}
	// y is only pending for a (maybe sent): it refuses all the same.
	if err := l.Confirm(e.ctx, []engine.LedgerEntry{copyOf(entry("r_a", "x", 1), "ma-1")}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	refused, err := l.IntendWindow(e.ctx, windowOf(b, "mb", "x", "w", "y", "y"))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || refused["x"] != "r_a" || refused["y"] != "r_a" {
		t.Fatalf("b's window refused %v, want x and y by r_a", refused)
	}
	got, err := l.Entries(e.ctx, "r_b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "w" || !got[0].Pending {
		t.Fatalf("b's ledger: %+v, want w pending only", got)
	}
	// A preview made after a's sends saw them as replayed: not refused.
	c := lease(t, e, "r_c")
	if refused, err := l.IntendWindow(e.ctx, windowOf(c, "mc", "x")); err != nil || len(refused) != 0 {
		t.Fatalf("c's window (previewed after a sent): %v %v", refused, err)
	}
	// An abandoned intent no longer refuses: z was certainly not sent.
	if err := l.Abandon(e.ctx, []engine.LedgerEntry{copyOf(entry("r_a", "z", 3), "ma-3")}); err != nil {
		t.Fatal(err)
	}
	if refused, err := l.IntendWindow(e.ctx, windowOf(b, "mb2", "z")); err != nil || len(refused) != 0 {
		t.Fatalf("b's window after a abandoned z: %v %v", refused, err)
	}
	ea, err := l.Entries(e.ctx, "r_a")
	if err != nil || len(ea) != 2 || ea[0].Pending || !ea[1].Pending || ea[1].ID != "y" {
		t.Fatalf("a's ledger: %+v %v", ea, err)
	}

	// Fencing: a stale owner (its lease taken by the next run) writes
	// nothing, and marks nothing in the DLQ's index.
	if err := e.st.Leases().Release(e.ctx, "r_a", a.Owner); err != nil {
		t.Fatal(err)
	}
	next := lease(t, e, "r_a")
	for _, stale := range []engine.Window{a, {ReplayID: "r_a", DLQ: a.DLQ, Owner: next.Owner, Epoch: a.Epoch, Since: a.Since}} {
		_, err := l.IntendWindow(e.ctx, windowOf(stale, "stale", "s1", "s2"))
		if !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("a stale window (owner %s, epoch %d; lease %s, %d): %v, want ErrLeaseLost", stale.Owner, stale.Epoch, next.Owner, next.Epoch, err)
		}
	}
	if ea2, _ := l.Entries(e.ctx, "r_a"); len(ea2) != len(ea) {
		t.Errorf("a stale window was recorded: %+v", ea2)
	}
	if h, _ := l.History(e.ctx, "orders.dlq", []string{"s1", "s2"}); len(h) != 0 {
		t.Errorf("a stale window marked the index: %+v", h)
	}
	if refused, err := l.IntendWindow(e.ctx, windowOf(next, "next", "s1")); err != nil || len(refused) != 0 {
		t.Errorf("the new owner's window: %v %v", refused, err)
	}
}

func TestLedgerWindowRefusesAndFences(t *testing.T) {
	t.Parallel()
	checkWindows(t, newEnv(t))
	signed, _ := signedEnv(t) // sealed records: a window refused in part is written in two calls
	checkWindows(t, signed)
}

// On Redis Cluster the window is two scripts (index, then the replay's
// slot); the same cases hold, and a cross-slot script would be refused.
func TestLedgerWindowOnCluster(t *testing.T) {
	if err := clustertest.Available(); err != nil {
		t.Skipf("no local Redis Cluster: %v", err)
	}
	t.Parallel()
	addrs := clustertest.StartCluster(t, 3)
	e := newEnvURL(t, "redis://"+strings.Join(addrs, ","))
	checkWindows(t, e)
	checkWindows(t, newEnvURL(t, "redis://"+strings.Join(addrs, ","), func(c *Config) { c.SigningKey = testKey }))
}

// A resend's window is fenced and counted in the DLQ's index, never
// refused and never recorded again.
func TestLedgerResendWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.st.Ledger()
	a, b := lease(t, e, "r_a"), lease(t, e, "r_b")
	if _, err := l.IntendWindow(e.ctx, windowOf(a, "ma", "x")); err != nil {
		t.Fatal(err)
	}
	rs := windowOf(b, "mb", "x")
	rs.Resend = true
	if refused, err := l.IntendWindow(e.ctx, rs); err != nil || len(refused) != 0 {
		t.Fatalf("resend window: %v %v", refused, err)
	}
	if got, _ := l.Entries(e.ctx, "r_b"); len(got) != 0 {
		t.Errorf("a resend window recorded intents: %+v", got)
	}
	h, err := l.History(e.ctx, "orders.dlq", []string{"x"})
	if err != nil || len(h["x"]) != 2 || h["x"][0].ReplayID != "r_b" {
		t.Errorf("history: %+v %v", h, err)
	}
	rs.Owner = "someone-else"
	if _, err := l.IntendWindow(e.ctx, rs); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("a stale resend window: %v", err)
	}
}
