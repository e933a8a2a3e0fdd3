package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// scriptPipe is a pipeline whose Lua scripts are called by their SHA1
// (EVALSHA), so a batch sends each script's text at most once in Redis's
// lifetime rather than with every call; Script.Run on a pipeline would send
// the whole text each time. Redis forgets loaded scripts when it restarts or
// is told SCRIPT FLUSH; Exec then loads the scripts that answered NOSCRIPT
// and runs just those calls again (by their text when the cache was
// flushed once more in between).
type scriptPipe struct {
	rdb   redis.UniversalClient
	pipe  redis.Pipeliner
	calls []scriptCall
}

// scriptCall is one queued script call, kept to be run again after NOSCRIPT.
type scriptCall struct {
	s    *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
}

// pipeline starts a scriptPipe on the store's client.
func (b *base) pipeline() *scriptPipe {
	return &scriptPipe{rdb: b.rdb, pipe: b.rdb.Pipeline()}
}

// Script queues a call of s by its SHA1 and returns its command, whose
// result is set once Exec returns.
func (p *scriptPipe) Script(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := s.EvalSha(ctx, p.pipe, keys, args...)
	p.calls = append(p.calls, scriptCall{s: s, keys: keys, args: args, cmd: cmd})
	return cmd
}

// Exec runs the pipeline and returns the first error other than redis.Nil,
// as execPipe does. A script call that answered NOSCRIPT did nothing, so
// loading its script and running it again records nothing twice; the
// pipeline's other commands are not repeated.
func (p *scriptPipe) Exec(ctx context.Context) error {
	cmds, _ := p.pipe.Exec(ctx)
	loaded := map[*redis.Script]bool{}
	for _, c := range p.calls {
		if !isNoScript(c.cmd.Err()) {
			continue
		}
		if !loaded[c.s] {
			if err := c.s.Load(ctx, p.rdb).Err(); err != nil {
				c.cmd.SetErr(err)
				continue
			}
			loaded[c.s] = true
		}
		again := c.s.EvalSha(ctx, p.rdb, c.keys, c.args...)
		if isNoScript(again.Err()) {
			// Flushed again between the load and the call (another client's
			// SCRIPT FLUSH): send the text, which Redis always runs.
			again = c.s.Eval(ctx, p.rdb, c.keys, c.args...)
		}
		c.cmd.SetVal(again.Val())
		c.cmd.SetErr(again.Err())
	}
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	return nil
}

// isNoScript reports whether err is Redis's answer to EVALSHA of a script
// it has not loaded.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
