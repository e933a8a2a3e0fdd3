package engine_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// A DLQ fed through the default exchange has no tap: its replay finds
// returns at the DLQ's tail with its own cursor (engine/settle_tail.go)
// instead of re-reading the DLQ at every step. These tests replay every
// tenth of such a DLQ with the default steps and count every delivery the
// engine took from the DLQ, through a counting broker and mover: each
// original message is delivered at most twice in all (the preview's read
// and the replay's), where re-reading took one more per step.

// readCount counts the deliveries the engine took from the DLQ: every
// message a whole read visited, every message a move read (a cursor's
// once, however often a kept one is offered again) and every arrival at
// a cursor's tail. byID counts the originals (no x-replay-id) by id.
type readCount struct {
	mu   sync.Mutex
	all  int
	byID map[string]int
	// by counts the deliveries by who took them: "scan", "move",
	// "cursor", "tail".
	by map[string]int
	// aside is set while the approval runs: its reads are counted in
	// by["approval"] only (see tailReplay).
	aside bool
}

func (c *readCount) see(m engine.Message, by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aside {
		c.by["approval"]++
		return
	}
	c.all++
	c.by[by]++
	if _, copied := m.Headers["x-replay-id"]; !copied {
		c.byID[m.MessageID]++
	}
}

type countScans struct {
	engine.Broker
	c *readCount
}

func (s countScans) Scan(ctx context.Context, q string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	return s.Broker.Scan(ctx, q, func(m engine.Message) error { s.c.see(m, "scan"); return visit(m) })
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

// tailReplay replays the tenth of a default-exchange DLQ of n from work
// (handle: work's consumer) with the default steps, counting the reads,
// and returns the replay, the counts and what the DLQ holds afterwards.
func tailReplay(t *testing.T, on testkit.Broker, args amqp.Table, n int, handle func(amqp.Delivery) string) (engine.Replay, *readCount, []amqp.Delivery) {
	t.Helper()
	ctx := context.Background()
	cnt := &readCount{byID: map[string]int{}, by: map[string]int{}}
	cfg := graceful
	cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel)
	e := newEnvTuned(t, cfg, on, func(d *engine.Deps) {
		d.Broker = countScans{Broker: d.Broker, c: cnt}
		d.Mover = countMover{CursorMover: d.Mover.(engine.CursorMover), c: cnt}
	})
	r := e.rabbit
	work, dlq := testkit.Name("work"), testkit.Name("dlq")
	r.Topology(work, dlq, args) // dead letters go through the default exchange only
	fillTenth(r, dlq, work, n)
	r.Consume(work, handle)
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, Source: work}, "U_REQ")
	if err != nil {
		t.Fatalf("preview: %v", err)
	}
	if p.Selected != n/10 || p.Returns.Mode != engine.ReturnsReread {
		t.Fatalf("preview: selected %d, returns %+v: want %d, without a tap", p.Selected, p.Returns, n/10)
	}
	// The approval's compare of a DLQ this small (below Config.ProofFrom)
	// is no read of the preview's or the replay's: counted aside.
	cnt.mu.Lock()
	cnt.aside = true
	cnt.mu.Unlock()
	ap, err := e.svc.Approve(ctx, p.Token, "U_APP", engine.Params{Rate: -1}, true)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	cnt.mu.Lock()
	cnt.aside = false
	cnt.mu.Unlock()
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.ReturnsMode != engine.ReturnsReread {
		t.Fatalf("replay found returns by %q, want without a tap", rep.ReturnsMode)
	}
	// Everything the replay did not take is back in the DLQ, none unacked.
	var left int
	testkit.Eventually(t, 2*time.Minute, "the DLQ to hold what the replay left", func() bool {
		st, err := e.broker.Counters(ctx, dlq)
		left = r.Count(dlq)
		return err == nil && st.Unacked == 0 && left == st.Ready && left >= n-rep.Sent
	})
	ds := r.Drain(dlq, left, 10*time.Second)
	if len(ds) != left {
		t.Fatalf("drained %d from the DLQ, want %d", len(ds), left)
	}
	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	most, at := 0, ""
	for id, k := range cnt.byID {
		if k > most {
			most, at = k, id
		}
	}
	t.Logf("%s: %s after %d step(s), sent %d, %d came back; %d deliveries from a DLQ of %d (%.2f×: %v), at most %d of one message (%s): %s",
		on.Name, rep.State, rep.Step, rep.Sent, rep.Returned, cnt.all, n, float64(cnt.all)/float64(n), cnt.by, most, at, rep.Note)
	// The broker's deliveries as the client received them
	// (amqp.Broker.Delivered: window deliveries no read handed out
	// included): at most the preview's and the replay's read of the DLQ,
	// the approval's, and what arrived at the tail.
	delivered := e.broker.Delivered(dlq)
	if most := int64(2*n + cnt.by["approval"] + cnt.by["tail"]); delivered > most {
		t.Fatalf("the broker delivered %d from the DLQ of %d: want at most %d (two reads, the approval's %d, the tail's %d)", delivered, n, most, cnt.by["approval"], cnt.by["tail"])
	}
	if len(cnt.byID) != n || most > 2 {
		t.Fatalf("the preview and the replay read %d distinct messages of %d, one of them (%s) %d times: want each at most twice", len(cnt.byID), n, at, most)
	}
	if rep.Step < 3 {
		t.Fatalf("the replay took %d step(s): want several, each looking for returns", rep.Step)
	}
	// The unselected messages are back in their order. On a quorum DLQ
	// the broker counts each give-back (x-delivery-count): the preview's,
	// the replay's, and the approval's compare's when it read.
	giveBacks := int64(2)
	if cnt.by["approval"] > 0 {
		giveBacks++
	}
	prev := -1
	for _, d := range ds {
		if _, copied := d.Headers["x-replay-id"]; copied {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
		if err != nil || i <= prev {
			t.Fatalf("DLQ holds %s after m-%d: want the unselected messages in their order", d.MessageId, prev)
		}
		prev = i
		if dc, ok := d.Headers["x-delivery-count"].(int64); ok && dc > giveBacks {
			t.Fatalf("%s was given back to the DLQ %d times (x-delivery-count): want at most %d", d.MessageId, dc, giveBacks)
		}
	}
	return rep, cnt, ds
}

// TestDefaultExchangeReplayReadsEachMessageAtMostTwice: a consumer that
// acks every copy; the replay finishes, having read each message of the
// DLQ at most twice with the preview.
func TestDefaultExchangeReplayReadsEachMessageAtMostTwice(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		const n = 2000
		rep, _, ds := tailReplay(t, on, args, n, func(amqp.Delivery) string { return "ack" })
		if rep.State != engine.StateFinished || rep.Sent != n/10 || rep.Returned != 0 || rep.Missing != 0 {
			t.Fatalf("replay %s: sent %d of %d, %d back, %d missing: %s; want finished, all sent, none back", rep.State, rep.Sent, n/10, rep.Returned, rep.Missing, rep.Note)
		}
		if len(ds) != n-n/10 {
			t.Fatalf("the DLQ holds %d afterwards, want the %d unselected", len(ds), n-n/10)
		}
	})
}

// TestDefaultExchangeReplayCountsReturnsAtTheTail: work's consumer
// rejects the copies of the second half's every hundredth message; the
// replay stops at the step they come back in, counting exactly the copies
// of it the DLQ holds afterwards, and still reads each original at most
// twice.
func TestDefaultExchangeReplayCountsReturnsAtTheTail(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		const n = 2000
		reject := func(d amqp.Delivery) string {
			if i, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-")); i >= n/2 && i%100 == 99 {
				return "reject"
			}
			return "ack"
		}
		rep, _, ds := tailReplay(t, on, args, n, reject)
		back := 0
		for _, d := range ds {
			if d.Headers["x-replay-id"] == rep.ID {
				back++
			}
		}
		if rep.State != engine.StateStopped || back == 0 || rep.Returned != back {
			t.Fatalf("replay %s after %d step(s): %d came back by its count, the DLQ holds %d copies of it: %s; want stopped, counting exactly what came back",
				rep.State, rep.Step, rep.Returned, back, rep.Note)
		}
	})
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
		e := newEnvTuned(t, graceful, b, func(d *engine.Deps) {
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
		ap, err := e.svc.Approve(t.Context(), p.Token, "U_APP", oneStep, false)
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
		if err := holder.Close(); err != nil {
			t.Fatal(err)
		}
		r.WaitCount(dlq, back, 30*time.Second)
		c, err := e.svc.Check(t.Context(), rep.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if c.Returned != back {
			t.Fatalf("check: %d back, want %d", c.Returned, back)
		}
	})
}
