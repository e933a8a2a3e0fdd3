package store

import (
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestTapGapsMergeOpenAndClosedWindows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g := e.st.TapGaps()
	t0 := time.UnixMilli(1_800_000_000_000)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	add := func(gap engine.TapGap) {
		t.Helper()
		if err := g.AddTapGap(e.ctx, "q.dlq", gap); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []engine.TapGap {
		t.Helper()
		gs, err := g.TapGaps(e.ctx, "q.dlq")
		if err != nil {
			t.Fatal(err)
		}
		return gs
	}
	if gs := list(); len(gs) != 0 {
		t.Fatalf("gaps of a DLQ never tapped: %v", gs)
	}
	// A worker sees the tap gone (open since its last drain at 10s), a run
	// sees it later (since 12s): one open gap, from the earlier start.
	add(engine.TapGap{From: at(12)})
	add(engine.TapGap{From: at(10)})
	if gs := list(); len(gs) != 1 || !gs[0].From.Equal(at(10)) || !gs[0].Open() {
		t.Fatalf("gaps %v: want one open since +10s", gs)
	}
	// The run declares it again at 15s, having seen it gone since 13s:
	// the open gap closes, from the earlier start.
	add(engine.TapGap{From: at(13), To: at(15)})
	if gs := list(); len(gs) != 1 || !gs[0].From.Equal(at(10)) || !gs[0].To.Equal(at(15)) {
		t.Fatalf("gaps %v: want one from +10s to +15s", gs)
	}
	// A slower process reports the same loss (since 11s) after it was
	// closed: nothing new.
	add(engine.TapGap{From: at(11)})
	if gs := list(); len(gs) != 1 || gs[0].Open() {
		t.Fatalf("gaps %v: a loss already closed was opened again", gs)
	}
	// A second loss, noticed and repaired at once.
	add(engine.TapGap{From: at(40), To: at(41)})
	gs := list()
	if len(gs) != 2 || !gs[1].From.Equal(at(40)) || !gs[1].To.Equal(at(41)) {
		t.Fatalf("gaps %v: want a second one from +40s to +41s", gs)
	}
	if !gs[0].Touches(at(14), time.Time{}) || gs[0].Touches(at(16), at(30)) || !gs[1].Touches(at(0), at(40)) {
		t.Fatalf("Touches is wrong for %v", gs)
	}
	if err := g.AddTapGap(e.ctx, "q.dlq", engine.TapGap{}); err == nil {
		t.Fatal("a gap without a start was accepted")
	}
	for i := 0; i < maxTapGaps+5; i++ {
		add(engine.TapGap{From: at(100 + 2*i), To: at(101 + 2*i)})
	}
	if gs := list(); len(gs) != maxTapGaps || !gs[len(gs)-1].From.Equal(at(100+2*(maxTapGaps+4))) {
		t.Fatalf("%d gaps kept, last %v: want the newest %d", len(gs), gs[len(gs)-1], maxTapGaps)
	}
}
