package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// gaveWayLog passes the engine's log on and counts, per replay, the lines
// that say a step's read gave way to another replay: a move that stopped
// for a seeker (giveway.go) or a cursor released for one (readers.go).
type gaveWayLog struct {
	w  io.Writer
	mu sync.Mutex
	by map[string]int
}

func (g *gaveWayLog) Write(p []byte) (int, error) {
	g.mu.Lock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		s := string(line)
		if !strings.Contains(s, "gave way: dlqbot") && !strings.Contains(s, "cursor released: dlqbot") {
			continue
		}
		if _, rest, ok := strings.Cut(s, `"replay_id":"`); ok {
			id, _, _ := strings.Cut(rest, `"`)
			g.by[id]++
		}
	}
	g.mu.Unlock()
	return g.w.Write(p)
}

func (g *gaveWayLog) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.by[id]
}

// TestTwoPacedReplaysOfOneDLQGiveWayToEachOther: a DLQ holds two sources'
// dead letters, 100 each, alternating one by one (a-0, b-0, a-1, b-1, …).
// Replay A of one source and replay B of the other, approved before either
// runs, each paced (10 msg/s) from a bot without a tap: A in steps of 80
// and 20 (its first pass lasts 8 s and more), B of 40 and 60; B starts once
// A's first copies arrived. A paced pass holds every message it passed for
// as long as it sends, so each replay's pass holds the other's next picks:
// the step that does not find its picks looks for them (seeking), and the
// pass holding them gives way (giveway.go), in turn. B's first pass
// reaches the DLQ's end, short of the picks A passed first, about 4 s
// after it began, while A's pass still holds them: the two passes meet
// however fast the machine sends. Decided against the consumers and the
// DLQ: both replays finish with every copy sent, none missing or held elsewhere,
// neither calling the other another client; each id reached its consumer
// exactly once with its replay's id; the DLQ is empty; and their passes met:
// at least one gave way to the other. A quorum and a classic DLQ
// (everyDLQKind).
func TestTwoPacedReplaysOfOneDLQGiveWayToEachOther(t *testing.T) {
	t.Parallel()
	everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
		const n = 100
		if dlqArgs != nil {
			// Both replays read the DLQ at every step: raise RabbitMQ 4's
			// default delivery limit (20), which the read budget guards.
			dlqArgs = testkit.Quorum(amqp.Table{"x-delivery-limit": 500})
		}
		cfg := fast
		gl := &gaveWayLog{w: testLog(t), by: map[string]int{}}
		cfg.Log = zerolog.New(gl).Level(zerolog.InfoLevel)
		e := newEnvTuned(t, cfg, on, func(d *replay.Deps) {
			d.Taps, d.Returns, d.TapGaps = testkit.TapOff{}, testkit.TapOff{}, testkit.TapOff{}
		})
		r := e.rabbit
		srcA, srcB, dlq := alternating(t, r, dlqArgs, n)
		pa := previewToken(t, e, engine.Selection{DLQ: dlq, Source: srcA})
		pb := previewToken(t, e, engine.Selection{DLQ: dlq, Source: srcB})
		if pa.Selected != n || pb.Selected != n {
			t.Fatalf("the previews selected %d and %d, want %d each", pa.Selected, pb.Selected, n)
		}
		recA, recB := &recorder{}, &recorder{}
		r.Consume(srcA, recA.handle)
		r.Consume(srcB, recB.handle)
		ctx := context.Background()
		prm := engine.Params{Step: 40, Cap: 80, Rate: 10, Timeout: 30 * time.Second}
		prmA := prm
		prmA.Step = 80
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prmA, true)
		if err != nil {
			t.Fatal(err)
		}
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ra := runAsyncReplay(t, e, apA.Replay.ID, "owner-a")
		testkit.Eventually(t, time.Minute, "A's first copies at its consumer", func() bool { return len(recA.got()) >= 5 })
		rb := runAsyncReplay(t, e, apB.Replay.ID, "owner-b")
		reps := map[string]engine.Replay{}
		for _, ch := range []chan engine.Replay{ra, rb} {
			select {
			case rep := <-ch:
				reps[rep.ID] = rep
				t.Logf("%s ended after %s: %s, sent %d of %d, gave way %d time(s): %s", rep.ID, time.Since(start).Round(100*time.Millisecond),
					rep.State, rep.Sent, rep.Total, gl.count(rep.ID), rep.Note)
			case <-time.After(4 * time.Minute):
				t.Fatal("the two paced replays did not end within 4 minutes")
			}
		}
		for _, rep := range reps {
			if rep.State != engine.StateFinished || rep.Sent != n || rep.Missing != 0 || rep.Elsewhere != 0 {
				t.Errorf("%s: %s, sent %d of %d, missing %d, elsewhere %d: %s; want finished with all sent", rep.ID, rep.State, rep.Sent, n, rep.Missing, rep.Elsewhere, rep.Note)
			}
			if strings.Contains(rep.Note, "another client") {
				t.Errorf("%s calls a dlqbot read another client: %s", rep.ID, rep.Note)
			}
			for _, f := range rep.Failures {
				if f.Kind == engine.FailureHeldElsewhere || f.Kind == engine.FailureMissing {
					t.Errorf("%s: %s %s: %s", rep.ID, f.ID, f.Kind, f.Detail)
				}
			}
		}
		// Their passes met: at least one gave way to the other (which of
		// them, and how often, is the brokers' timing: on a loaded machine
		// one replay may find its picks given back without ever holding
		// the other's).
		if gl.count(apA.Replay.ID)+gl.count(apB.Replay.ID) == 0 {
			t.Errorf("neither replay gave way to the other: their passes did not meet as the test means them to")
		}
		// The broker's side.
		for _, c := range []struct {
			rec *recorder
			id  string
			src string
		}{{recA, apA.Replay.ID, srcA}, {recB, apB.Replay.ID, srcB}} {
			testkit.Eventually(t, 60*time.Second, "every copy at "+c.src+"'s consumer", func() bool { return len(c.rec.got()) >= n && r.Count(c.src) == 0 })
			by := ids(c.rec.got())
			if len(by) != n {
				t.Errorf("%s's consumer got %d distinct ids, want %d", c.src, len(by), n)
			}
			for mid, k := range by {
				if k != 1 {
					t.Errorf("%s delivered %d times", mid, k)
				}
			}
			for _, d := range c.rec.got() {
				if d.Headers["x-replay-id"] != c.id {
					t.Errorf("%s reached %s with x-replay-id %v, want %s", d.MessageId, c.src, d.Headers["x-replay-id"], c.id)
					break
				}
			}
		}
		testkit.Eventually(t, 30*time.Second, "the DLQ empty", func() bool { return r.Count(dlq) == 0 })
	})
}

// alternating makes a DLQ with dlqArgs holding n dead letters of each of
// two source queues, alternating one by one ("a-<i>" from src, "b-<i>"
// from other), each with the x-death of its source.
func alternating(t *testing.T, r *testkit.Rabbit, dlqArgs amqp.Table, n int) (src, other, dlq string) {
	t.Helper()
	src, other, dlq = testkit.Name("src"), testkit.Name("other"), testkit.Name("dlq")
	r.Queue(dlq, dlqArgs)
	r.Queue(src, nil)
	r.Queue(other, nil)
	died := time.Now().Add(-time.Minute).Truncate(time.Second)
	msgs := make([]amqp.Publishing, 0, 2*n)
	for i := range n {
		msgs = append(msgs,
			testkit.Msg(fmt.Sprintf("a-%d", i), testkit.Body(i, 100), testkit.DeathHeaders(src, died)),
			testkit.Msg(fmt.Sprintf("b-%d", i), testkit.Body(i, 100), testkit.DeathHeaders(other, died)))
	}
	r.Publish(dlq, msgs...)
	r.WaitCount(dlq, 2*n, 30*time.Second)
	return src, other, dlq
}
