package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// cmdLog is a go-redis hook that records the names of the commands sent,
// marking those sent in a pipeline.
type cmdLog struct {
	mu    sync.Mutex
	piped []string
	alone []string
}

func (l *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.mu.Lock()
		l.alone = append(l.alone, cmd.FullName())
		l.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (l *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		l.mu.Lock()
		for _, c := range cmds {
			l.piped = append(l.piped, c.FullName())
		}
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands logged since the last take and forgets them.
func (l *cmdLog) take() (piped, alone []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	piped, alone = l.piped, l.alone
	l.piped, l.alone = nil, nil
	return piped, alone
}

// TestScriptPipeLoadsOnceAndSurvivesFlush runs a script no one else loads:
// the first pipeline meets NOSCRIPT, loads it and runs only that call
// again; the next sends EVALSHA alone; after SCRIPT FLUSH it loads again.
// Not parallel: it flushes Redis's script cache.
func TestScriptPipeLoadsOnceAndSurvivesFlush(t *testing.T) {
	e := newEnv(t)
	var log cmdLog
	e.rdb.AddHook(&log)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	s := redis.NewScript("-- " + hex.EncodeToString(salt[:]) + "\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])")
	p := e.st.b.cfg.Prefix
	run := func(round int64) {
		t.Helper()
		sp := e.st.b.pipeline()
		other := sp.pipe.Incr(e.ctx, p+"other")
		cmd := sp.Script(e.ctx, s, []string{p + "n"}, 10)
		if err := sp.Exec(e.ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n, err := cmd.Int64(); err != nil || n != 10*round {
			t.Fatalf("round %d: script gave %d, %v; want %d (run exactly once per round)", round, n, err, 10*round)
		}
		if other.Val() != round {
			t.Fatalf("round %d: the pipeline's other command ran %d times in all, want %d", round, other.Val(), round)
		}
	}

	run(1) // never loaded: NOSCRIPT, load, run again
	piped, alone := log.take()
	if !slices.Contains(piped, "evalsha") || slices.Contains(piped, "eval") {
		t.Fatalf("first pipeline sent %v: want EVALSHA, never EVAL", piped)
	}
	if !slices.Contains(alone, "script") || !slices.Contains(alone, "evalsha") {
		t.Fatalf("after NOSCRIPT the pipe sent %v: want SCRIPT (LOAD) then EVALSHA", alone)
	}

	run(2) // loaded: one round trip, by SHA
	piped, alone = log.take()
	if !slices.Contains(piped, "evalsha") || slices.Contains(piped, "eval") || len(alone) != 0 {
		t.Fatalf("second pipeline sent %v then %v: want EVALSHA in the pipeline only", piped, alone)
	}

	if err := e.rdb.ScriptFlush(e.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	log.take()
	run(3) // as after a Redis restart
	if _, alone = log.take(); !slices.Contains(alone, "script") {
		t.Fatalf("after SCRIPT FLUSH the pipe sent %v: want SCRIPT (LOAD)", alone)
	}
}

// TestPipelinedWritesAfterScriptFlush checks the store's pipelined
// scripts (the ledger's index, the tap's returns) are sent by SHA and still
// record everything after Redis lost its scripts.
func TestPipelinedWritesAfterScriptFlush(t *testing.T) {
	e := newEnv(t)
	var log cmdLog
	e.rdb.AddHook(&log)
	for round := range 2 {
		if err := e.rdb.ScriptFlush(e.ctx).Err(); err != nil {
			t.Fatal(err)
		}
		id := string(rune('a' + round))
		if err := e.st.Ledger().Confirm(e.ctx, []engine.LedgerEntry{entry("r_1", id, 1)}); err != nil {
			t.Fatalf("confirm after flush: %v", err)
		}
		ev := engine.ReturnEvent{ReplayID: "r_1", ID: id, Group: "g", ReplayCount: 1, At: e.clock.Now()}
		if err := e.st.Returns().Record(e.ctx, "orders.dlq", []engine.ReturnEvent{ev}, 1); err != nil {
			t.Fatalf("record after flush: %v", err)
		}
	}
	piped, _ := log.take()
	// The scripts the two rounds pipeline (a confirm's ledger append, the
	// sent index's floor of nothing and its mark; the tap's record), less
	// those sent again alone after a NOSCRIPT: 6.
	if n := countOf(piped, "evalsha"); n != 6 || slices.Contains(piped, "eval") {
		t.Fatalf("pipelines sent %v: want 6 EVALSHA and no EVAL", piped)
	}
	hist, err := e.st.Ledger().History(e.ctx, "orders.dlq", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist["a"]) != 1 || len(hist["b"]) != 1 || hist["a"][0].Count != 1 {
		t.Fatalf("history after flushes: %+v", hist)
	}
	rec, err := e.st.Returns().Returned(e.ctx, "r_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Total != 2 || rec.IDs["a"] != 1 || rec.IDs["b"] != 1 {
		t.Fatalf("returns after flushes: %+v", rec)
	}
}

func countOf(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}
