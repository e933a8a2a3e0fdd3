package replay_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// A DLQ fed through the default exchange has no tap: its replay finds
// returns at the DLQ's tail with its own cursor (engine/settle_tail.go)
// instead of re-reading the DLQ at every step (tail_reads_test.go counts
// the broker's deliveries of such a replay). The test below is of a tail
// that cannot see the DLQ, with the reads counted by who took them.

// readCount counts the messages the engine's moves and cursors read from
// the DLQ, by who read them: "move", "cursor", "tail".
type readCount struct {
	mu   sync.Mutex
	byID map[string]int
	by   map[string]int
}

func (c *readCount) see(m engine.Message, by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by[by]++
	if _, copied := m.Headers["x-replay-id"]; !copied {
		c.byID[m.MessageID]++
	}
}

type countMover struct {
	engine.CursorMover
	c *readCount
}

func (cm countMover) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	pick := req.Pick
	req.Pick = func(m engine.Message) (engine.Pick, bool) { cm.c.see(m, "move"); return pick(m) }
	return cm.CursorMover.Move(ctx, req)
}

func (cm countMover) OpenCursor(ctx context.Context, q string) (engine.Cursor, error) {
	cur, err := cm.CursorMover.OpenCursor(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countCursor{TailCursor: cur.(engine.TailCursor), c: cm.c, seen: map[int]bool{}}, nil
}

type countCursor struct {
	engine.TailCursor
	c    *readCount
	seen map[int]bool
}

func (cc *countCursor) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	pick := req.Pick
	req.Pick = func(m engine.Message) (engine.Pick, bool) {
		if !cc.seen[m.Seq] {
			cc.seen[m.Seq] = true
			cc.c.see(m, "cursor")
		}
		return pick(m)
	}
	return cc.TailCursor.Move(ctx, req)
}

func (cc *countCursor) Arrivals(ctx context.Context, visit func(engine.Message)) error {
	return cc.TailCursor.Arrivals(ctx, func(m engine.Message) { cc.c.see(m, "tail"); visit(m) })
}

// TestATailThatCannotSeeTheDLQClaimsNothing: another consumer takes the
// DLQ's arrivals from the replay's first copy on (it holds the 5 copies
// the handler rejects as they come back), so the cursor's tail cannot
// tell what came back: the run's last look must not finish on "0 came
// back" but stop and say it could not tell; check, once the other
// consumer let go, counts all 5 from the whole DLQ. It waits out the last
// judgement's patience (15 s): one broker.
func TestATailThatCannotSeeTheDLQClaimsNothing(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		const n, back = 20, 5
		cnt := &readCount{byID: map[string]int{}, by: map[string]int{}}
		e := newEnvTuned(t, graceful, b, func(d *replay.Deps) {
			d.Mover = countMover{CursorMover: d.Mover.(engine.CursorMover), c: cnt}
		})
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, nil) // dead letters go through the default exchange only
		r.Reject(src, testkit.Msgs(n, 50)...)
		r.WaitCount(dlq, n, 20*time.Second)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		if p.Returns.Mode != engine.ReturnsReread {
			t.Fatalf("preview returns %+v: want no tap", p.Returns)
		}
		holder := holdAtFirstCopy(t, r, src, dlq, back, nil, rejectEvery(n/back))
		ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", oneStep, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := e.svc.Run(t.Context(), ap.Replay.ID, "owner") // stopped: its error says why
		if rep.Sent != n || rep.State != engine.StateStopped ||
			strings.Contains(rep.Note, "came back") || !strings.Contains(rep.Note, "could not tell") {
			t.Fatalf("replay %s sent %d returned %d note %q: want stopped on a last look that could not tell, all sent",
				rep.State, rep.Sent, rep.Returned, rep.Note)
		}
		if cnt.by["cursor"] == 0 {
			t.Fatalf("the replay read through no cursor (%v): the test proves nothing of its tail", cnt.by)
		}
		c := releaseAndCheck(t, e, holder, dlq, rep.ID, back)
		if c.Returned != back {
			t.Fatalf("check: %d back, want %d", c.Returned, back)
		}
	})
}
