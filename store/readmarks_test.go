package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestReadMarks: a partial read only raises a queue's mark, a whole read
// replaces it, and queues and vhosts are kept apart.
func TestReadMarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.st.ReadMarks()
	if _, ok, err := m.LastRead(e.ctx, "/", "q"); err != nil || ok {
		t.Fatalf("no mark yet: ok %v, %v", ok, err)
	}
	at := time.UnixMilli(time.Now().UnixMilli())
	steps := []struct {
		count       int
		whole       bool
		want, reads int
	}{
		{3, true, 3, 1},
		{2, false, 3, 2}, // a partial read never lowers the mark
		{5, false, 5, 3},
		{1, true, 1, 1}, // a whole read saw every message
	}
	for i, s := range steps {
		if err := m.RecordRead(e.ctx, "/", "q", engine.ReadMark{Count: s.count, At: at}, s.whole); err != nil {
			t.Fatal(err)
		}
		got, ok, err := m.LastRead(e.ctx, "/", "q")
		if err != nil || !ok || got.Count != s.want || got.Reads != s.reads || !got.At.Equal(at) {
			t.Fatalf("step %d: mark %+v (ok %v, %v), want count %d, reads %d at %v", i, got, ok, err, s.want, s.reads, at)
		}
	}
	if _, ok, _ := m.LastRead(e.ctx, "other", "q"); ok {
		t.Fatal("another vhost's queue shares the mark")
	}
	if ttl := e.rdb.PTTL(e.ctx, e.st.b.k.readMark("/", "q")).Val(); ttl <= 0 {
		t.Fatalf("the mark has no expiry (%v)", ttl)
	}
}

// TestReadMarkTampered: a signed mark lowered in Redis (more reads for
// the budget), or stripped of its MAC, is refused and reported, by
// LastRead and by a partial read's RecordRead; a whole read replaces it.
func TestReadMarkTampered(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	m := e.st.ReadMarks()
	key := e.st.b.k.readMark("/", "q")
	at := time.UnixMilli(time.Now().UnixMilli())
	if err := m.RecordRead(e.ctx, "/", "q", engine.ReadMark{Count: 7, At: at}, true); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := m.LastRead(e.ctx, "/", "q"); err != nil || !ok || got.Count != 7 {
		t.Fatalf("signed mark: %+v %v %v", got, ok, err)
	}
	for _, tamper := range []func(){
		func() { e.rdb.HSet(e.ctx, key, "count", 1) },
		func() { e.rdb.HSet(e.ctx, key, "reads", 0) },
		func() { e.rdb.HDel(e.ctx, key, "sig") },
	} {
		if err := m.RecordRead(e.ctx, "/", "q", engine.ReadMark{Count: 7, At: at}, true); err != nil {
			t.Fatal(err)
		}
		tamper()
		n := len(*refused)
		got, _, err := m.LastRead(e.ctx, "/", "q")
		if !errors.Is(err, engine.ErrBadSignature) {
			t.Fatalf("a changed mark reads %+v, %v; want refused", got, err)
		}
		if err := m.RecordRead(e.ctx, "/", "q", engine.ReadMark{Count: 2, At: at}, false); !errors.Is(err, engine.ErrBadSignature) {
			t.Fatalf("a partial read on a changed mark: %v; want refused", err)
		}
		if len(*refused) != n+2 || (*refused)[n].Kind != "read mark" {
			t.Fatalf("%d refusals reported, want 2 of kind read mark", len(*refused)-n)
		}
	}
	if err := m.RecordRead(e.ctx, "/", "q", engine.ReadMark{Count: 4, At: at}, true); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := m.LastRead(e.ctx, "/", "q"); err != nil || !ok || got.Count != 4 {
		t.Fatalf("after a whole read: %+v %v %v", got, ok, err)
	}
}
