package replay_test

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
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// tailConsumer is work's consumer in TestDefaultExchangeReplayReadsEachMessageAtMostTwice:
// it rejects (dead-letters) the copies reject picks and acks the rest,
// counting each.
type tailConsumer struct {
	mu       sync.Mutex
	acked    map[string]int
	rejected map[string]int
	reject   func(id string) bool
}

func (c *tailConsumer) handle(d amqp.Delivery) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reject(d.MessageId) {
		c.rejected[d.MessageId]++
		return "reject"
	}
	c.acked[d.MessageId]++
	return "ack"
}

func (c *tailConsumer) counts() (acked, rejected int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.acked {
		acked += n
	}
	for _, n := range c.rejected {
		rejected += n
	}
	return acked, rejected
}

// TestDefaultExchangeReplayReadsEachMessageAtMostTwice replays every
// tenth message of a DLQ of 1,000 fed through the default exchange (no
// tap can be bound: returns are found at the tail of the replay's own
// read, engine/settle_tail.go) with the default steps (10, 20, 40, …),
// its consumer dead-lettering the copies of m-399, m-499, m-599 and m-699
// (step 3) back into the DLQ. Counted on what the broker delivered from
// the DLQ to dlqbot's reads (amqp.Broker.Delivered, every delivery as it
// arrived): the preview, the approval and the replay took each original
// at most twice and each copy that came back once — re-reading the DLQ
// for returns at every step took a whole read more per step. The replay
// stops on step 3's returns, and counts exactly the copies of it the DLQ
// holds afterwards, which are the copies its consumer rejected. On 3.10,
// 4.0 and 4.3, a classic and a quorum DLQ each; a quorum DLQ's replay
// re-reads for its returns (tailReads), within what its read budget
// counts.
func TestDefaultExchangeReplayReadsEachMessageAtMostTwice(t *testing.T) {
	t.Parallel()
	eachKind(t, func(t *testing.T, on testkit.Broker, args amqp.Table) {
		const n, selected = 1000, 100
		ctx := context.Background()
		cfg := fast
		cfg.Tune.ProofFrom = 1 // the approval proves from the broker's counts, reading nothing
		cfg.Log = zerolog.New(testLog(t)).Level(zerolog.InfoLevel)
		e := newEnvOn(t, cfg, on)
		r := e.rabbit
		work, dlq := testkit.Name("work"), testkit.Name("dlq")
		r.Topology(work, dlq, args) // dead letters go through the default exchange only
		fillTenth(r, dlq, work, n)
		got := &tailConsumer{acked: map[string]int{}, rejected: map[string]int{}, reject: func(id string) bool {
			i, _ := strconv.Atoi(strings.TrimPrefix(id, "m-"))
			return i >= 300 && i < 700 && i%100 == 99
		}}
		r.Consume(work, got.handle)
		testkit.Eventually(t, 2*time.Minute, "a management sample of the full DLQ", func() bool {
			cs, err := e.broker.Counters(ctx, dlq)
			return err == nil && !cs.SampledAt.IsZero() && cs.Ready == n && cs.Unacked == 0
		})
		d0 := e.broker.Delivered(dlq)
		p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, Source: work}, "U_REQ")
		if err != nil {
			t.Fatalf("preview: %v", err)
		}
		if p.Selected != selected || !p.Coverage.Whole() || p.Returns.Mode != engine.ReturnsReread {
			t.Fatalf("preview: selected %d, coverage %+v, returns %+v: want %d of a whole read, without a tap", p.Selected, p.Coverage, p.Returns, selected)
		}
		testkit.Eventually(t, time.Minute, "the preview's give-backs in the DLQ", func() bool { return r.Count(dlq) == n })
		ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Rate: -1}, true)
		if err != nil {
			t.Fatalf("approve: %v", err)
		}
		rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		delivered := e.broker.Delivered(dlq) - d0
		t.Logf("%s: %s after %d step(s), %d sent, %d came back: %s; %d deliveries from the DLQ of %d (%.2f×)",
			on.Name, rep.State, rep.Step, rep.Sent, rep.Returned, rep.Note, delivered, n, float64(delivered)/float64(n))
		if rep.ReturnsMode != engine.ReturnsReread {
			t.Fatalf("the replay found returns by %q, want without a tap", rep.ReturnsMode)
		}
		if rep.State != engine.StateStopped || rep.Step != 3 || rep.Sent != 70 {
			t.Fatalf("replay %s after step %d, %d sent: %s; want stopped on step 3's returns, 70 sent", rep.State, rep.Step, rep.Sent, rep.Note)
		}
		// The broker's side: the copies rejected are in the DLQ, each once,
		// beside the originals not sent.
		testkit.Eventually(t, 30*time.Second, "every copy at the consumer", func() bool {
			a, rj := got.counts()
			return a+rj == rep.Sent
		})
		_, rejected := got.counts()
		left := n - rep.Sent + rejected
		testkit.Eventually(t, 2*time.Minute, "the DLQ to hold what the replay left, no consumer on it", func() bool {
			ready, consumers := r.Look(dlq)
			return ready == left && consumers == 0
		})
		back := 0
		for _, d := range r.Drain(dlq, left, 10*time.Second) {
			if d.Headers["x-replay-id"] == rep.ID {
				back++
			}
		}
		if rejected != 4 || back != rejected || rep.Returned != back {
			t.Fatalf("the consumer rejected %d copies, the DLQ holds %d copies of the replay, the replay counted %d back: want 4 everywhere", rejected, back, rep.Returned)
		}
		if args["x-queue-type"] == "quorum" {
			// A quorum DLQ's replay without a tap reads without a cursor
			// and re-reads for its returns (settle_tail.go tailReads): its
			// reads are the ones the read budget counts.
			if most := int64((2+rep.Step*(1+engine.RereadsPerStep))*n + back); delivered > most {
				t.Fatalf("%d deliveries from the quorum DLQ of %d in %d step(s): want at most %d", delivered, n, rep.Step, most)
			}
			return
		}
		if most := int64(2*n + back); delivered > most {
			t.Fatalf("the preview, the approval and the replay took %d deliveries from the DLQ of %d with %d copies back: want at most %d (each original twice, each copy once)", delivered, n, back, most)
		}
		if delivered < int64(n+selected) {
			t.Fatalf("%d deliveries from the DLQ of %d: the count missed reads", delivered, n)
		}
	})
}
