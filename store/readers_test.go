package store

import (
	"slices"
	"testing"
	"time"
)

// TestReadingMarks: a replay's cursor mark makes it a reader of the DLQ for
// the others (never for itself), a seeking mark makes it a seeker too, a
// mark counts until its time is up, and DoneReading removes it.
func TestReadingMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	dlq := "orders.dlq"
	if err := c.Reading(e.ctx, dlq, "r_a", false, 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Reading(e.ctx, dlq, "r_b", true, 0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if rs, err := c.Readers(e.ctx, dlq, "r_c"); err != nil || !slices.Equal(rs, []string{"r_a", "r_b"}) {
		t.Fatalf("readers seen by r_c: %v %v; want r_a (cursor) and r_b (seeking)", rs, err)
	}
	if rs, err := c.Readers(e.ctx, dlq, "r_a"); err != nil || !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("readers seen by r_a: %v %v; want only r_b", rs, err)
	}
	if ss, err := c.Seekers(e.ctx, dlq, "r_a"); err != nil || !slices.Equal(ss, []string{"r_b"}) {
		t.Fatalf("seekers seen by r_a: %v %v; want r_b", ss, err)
	}
	if ss, err := c.Seekers(e.ctx, dlq, "r_b"); err != nil || len(ss) != 0 {
		t.Fatalf("seekers seen by r_b: %v %v; want none (r_a only holds a cursor)", ss, err)
	}
	// A claim of a step in flight still makes a reader beside the marks.
	if _, err := c.Claim(e.ctx, dlq, "r_d", []string{"x"}, e.clock.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if rs, _ := c.Readers(e.ctx, dlq, "r_c"); !slices.Equal(rs, []string{"r_a", "r_b", "r_d"}) {
		t.Fatalf("readers with a claim: %v", rs)
	}
	// r_a's mark lapses; r_b turns its seeking mark back into a reader's.
	e.clock.Advance(11 * time.Second)
	if err := c.Reading(e.ctx, dlq, "r_b", false, 0, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if rs, _ := c.Readers(e.ctx, dlq, "r_d"); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("readers after r_a's mark lapsed: %v; want r_b", rs)
	}
	if ss, _ := c.Seekers(e.ctx, dlq, "r_d"); len(ss) != 0 {
		t.Fatalf("seekers after r_b found its picks: %v", ss)
	}
	if err := c.DoneReading(e.ctx, dlq, "r_b"); err != nil {
		t.Fatal(err)
	}
	if rs, _ := c.Readers(e.ctx, dlq, "r_d"); len(rs) != 0 {
		t.Fatalf("readers after DoneReading: %v", rs)
	}
}

// TestReadSince: a read that ended, or whose mark lapsed, after a moment
// still counts as reading since that moment (for the others, never for
// itself), and not since a later one; Readers never counts an ended mark;
// an ended mark older than doneKept is deleted as marks are read.
func TestReadSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	dlq := "orders.dlq"
	before := e.clock.Now()
	if err := c.Reading(e.ctx, dlq, "r_a", false, 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Reading(e.ctx, dlq, "r_b", false, 0, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	if err := c.DoneReading(e.ctx, dlq, "r_a"); err != nil {
		t.Fatal(err)
	}
	if rs, _ := c.Readers(e.ctx, dlq, "r_c"); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("readers after r_a ended: %v; want r_b", rs)
	}
	if rs, err := c.ReadSince(e.ctx, dlq, "r_c", before); err != nil || !slices.Equal(rs, []string{"r_a", "r_b"}) {
		t.Fatalf("read since before r_a ended: %v %v; want r_a (ended since) and r_b", rs, err)
	}
	if rs, _ := c.ReadSince(e.ctx, dlq, "r_a", before); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("read since, seen by r_a: %v; want r_b only", rs)
	}
	e.clock.Advance(time.Second)
	if rs, _ := c.ReadSince(e.ctx, dlq, "r_c", e.clock.Now()); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("read since after r_a ended: %v; want r_b", rs)
	}
	// r_b's mark lapses: it read until then.
	lapsing := e.clock.Now()
	e.clock.Advance(20 * time.Second)
	if rs, _ := c.Readers(e.ctx, dlq, "r_c"); len(rs) != 0 {
		t.Fatalf("readers after r_b's mark lapsed: %v", rs)
	}
	if rs, _ := c.ReadSince(e.ctx, dlq, "r_c", lapsing); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("read since before r_b's mark lapsed: %v; want r_b", rs)
	}
	if rs, _ := c.ReadSince(e.ctx, dlq, "r_c", e.clock.Now()); len(rs) != 0 {
		t.Fatalf("read since after every mark ended: %v", rs)
	}
	e.clock.Advance(doneKept + time.Minute)
	if _, err := c.Readers(e.ctx, dlq, "r_c"); err != nil {
		t.Fatal(err)
	}
	if n, err := e.rdb.HExists(e.ctx, e.st.b.k.readers(dlq), "r_a").Result(); err != nil || n {
		t.Fatalf("r_a's ended mark is still kept %v after it ended (%v)", doneKept, err)
	}
}
