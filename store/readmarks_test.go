package store

import (
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
