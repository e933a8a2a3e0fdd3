package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// flushAfterLoad is a go-redis hook that flushes Redis's script cache
// (through another client) right after each SCRIPT LOAD, as another
// client's SCRIPT FLUSH landing between a pipe's load and its call would.
type flushAfterLoad struct {
	cmdLog
	other redis.UniversalClient
}

func (f *flushAfterLoad) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	logged := f.cmdLog.ProcessHook(next)
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := logged(ctx, cmd)
		if a := cmd.Args(); len(a) > 1 && cmd.Name() == "script" && a[1] == "load" {
			_ = f.other.ScriptFlush(ctx).Err()
		}
		return err
	}
}

// TestScriptPipeRunsAScriptFlushedBetweenLoadAndCall: the pipe's script
// answers NOSCRIPT, is loaded, and the cache is flushed again before the
// call runs (seen in the suite: "ledger confirm: NOSCRIPT" while another
// test flushed). The call runs by its text, exactly once. Not parallel: it
// flushes Redis's script cache.
func TestScriptPipeRunsAScriptFlushedBetweenLoadAndCall(t *testing.T) {
	e := newEnv(t)
	other, err := Open(testURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	hook := &flushAfterLoad{other: other}
	e.rdb.AddHook(hook)
	var salt [8]byte
	_, _ = rand.Read(salt[:])
	s := redis.NewScript("-- " + hex.EncodeToString(salt[:]) + "\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])")
	sp := e.st.b.pipeline()
	cmd := sp.Script(e.ctx, s, []string{e.st.b.cfg.Prefix + "n"}, 7)
	if err := sp.Exec(e.ctx); err != nil {
		t.Fatalf("exec: %v", err)
	}
	if n, err := cmd.Int64(); err != nil || n != 7 {
		t.Fatalf("script gave %d, %v; want 7 (run exactly once)", n, err)
	}
	if _, alone := hook.take(); !slices.Contains(alone, "eval") {
		t.Fatalf("after a flush between load and call the pipe sent %v: want EVAL", alone)
	}
}
