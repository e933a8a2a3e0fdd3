package replay_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

func TestDefaultExchangeDLQFallsBackToCountedRereads(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		for _, kind := range []string{"classic", "quorum"} {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				var args amqp.Table
				if kind == "quorum" {
					args = testkit.Quorum(nil)
				}
				e := newTapEnv(t, b, graceful, nil)
				r := e.rabbit
				src, dlq := testkit.Name("src"), testkit.Name("dlq")
				r.Topology(src, dlq, args) // dead letters go through the default exchange only
				r.Reject(src, testkit.Msgs(20, 50)...)
				r.WaitCount(dlq, 20, 20*time.Second)
				p := preview(t, &e.env, engine.Selection{DLQ: dlq})
				if p.Returns.Mode != engine.ReturnsReread || p.Returns.Reads != 2 || !strings.Contains(p.Returns.Detail, "re-reading the DLQ: 2 read(s)") {
					t.Fatalf("preview returns %+v: want re-reads, 2 of them (steps of 10 and 20)", p.Returns)
				}
				r.Consume(src, func(amqp.Delivery) string { return "reject" })
				ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", engine.Params{Rate: -1, Timeout: 20 * time.Second}, false)
				if err != nil {
					t.Fatal(err)
				}
				scans0, _ := e.reads.of(dlq)
				rep, err := e.svc.Run(t.Context(), ap.Replay.ID, "owner")
				if err != nil {
					t.Fatal(err)
				}
				if rep.State != engine.StateStopped || rep.Sent != 10 || rep.Returned == 0 || rep.ReturnsMode != engine.ReturnsReread {
					t.Fatalf("replay %s sent %d returned %d mode %q: want stopped after 10 with returns found by re-reading", rep.State, rep.Sent, rep.Returned, rep.ReturnsMode)
				}
				if scans, _ := e.reads.of(dlq); scans != scans0+1 {
					t.Fatalf("the run read the DLQ %d time(s), want 1 (one re-read for its one step)", scans-scans0)
				}
				r.WaitCount(dlq, 20, 20*time.Second)
				c, err := e.svc.Check(t.Context(), rep.ID, "")
				if err != nil {
					t.Fatal(err)
				}
				if c.Returned != 10 || len(c.Groups) != 1 || c.Groups[0].Group != "rejected" {
					t.Fatalf("check %+v: want 10 back, all rejected", c)
				}
			})
		}
	})
}

func TestAQueueDeadLetteringStraightIntoTheDLQRulesOutTheTap(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e := newTapEnv(t, b, fast, nil)
		r := e.rabbit
		src, direct, dlq := testkit.Name("src"), testkit.Name("direct"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		r.Queue(direct, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		r.Reject(src, testkit.Msgs(3, 50)...)
		r.WaitCount(dlq, 3, 20*time.Second)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		if p.Returns.Mode != engine.ReturnsReread || !strings.Contains(p.Returns.Detail, direct) {
			t.Fatalf("preview returns %+v: want re-reads, naming %s (it dead-letters through the default exchange)", p.Returns, direct)
		}
	})
}

// slowCount is a broker whose DLQ takes longer than a second to inspect,
// as a busy broker's can (a passive declare and the management API).
type slowCount struct {
	engine.Broker
	dlq   string
	delay time.Duration
}

func (b *slowCount) Inspect(ctx context.Context, q string) (engine.QueueInfo, error) {
	if q == b.dlq {
		select {
		case <-ctx.Done():
		case <-time.After(b.delay): // the latency simulated, not a wait for anything
		}
	}
	return b.Broker.Inspect(ctx, q)
}

func TestDeadLettersBypassingTheTapSwitchTheRunToRereads(t *testing.T) {
	t.Parallel()
	// A classic DLQ and the tap: one broker (testkit.ClassicOn), all three
	// with DLQBOT_CLASSIC_ALL=1.
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		bypassSwitchesToRereads(t, b, false)
	})
	t.Run("count slow to read", func(t *testing.T) {
		t.Parallel()
		bypassSwitchesToRereads(t, testkit.Rabbit3, true)
	})
}

// bypassSwitchesToRereads checks a one-step replay whose consumer publishes
// some failures straight to the DLQ: the run's last step must see them
// (checkBypass), even when the DLQ's count is slow to read (slow: over
// the second after which other steps skip the check).
func bypassSwitchesToRereads(t *testing.T, b testkit.Broker, slow bool) {
	// The step must still be settling when the consumer's publishes past
	// the tap land: beside make test's other lanes they came more than
	// graceful's 2 s after the broker's rejections.
	cfg := graceful
	cfg.SettleGrace = 10 * time.Second
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	var wrap func(d *replay.Deps)
	if slow {
		wrap = func(d *replay.Deps) {
			d.Broker = &slowCount{Broker: d.Broker, dlq: dlq, delay: 1200 * time.Millisecond}
		}
	}
	e := newTapEnv(t, b, cfg, wrap)
	r := e.rabbit
	r.DLXTopology(src, dlq, nil)
	const n = 30
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 20*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	if p.Returns.Mode != engine.ReturnsTap {
		t.Fatalf("preview returns %+v, want the tap", p.Returns)
	}
	// Spring's recoverer here publishes failures straight to the DLQ
	// through the default exchange, past its bindings and the tap; the
	// broker's own rejections go through the exchange.
	springLike(t, r, src, dlq)
	rep := approveRun(t, &e.env, p.Token, oneStep, false)
	wantEx, wantRej := 0, 0
	for i := 0; i < n; i++ {
		switch {
		case i%3 == 0:
			wantEx++
		case i%5 == 1:
			wantRej++
		}
	}
	if rep.State != engine.StateStopped || rep.ReturnsMode != engine.ReturnsReread || !strings.Contains(rep.Note, "without passing its bindings") {
		t.Fatalf("replay %s mode %q note %q: want stopped, switched to re-reads, saying why", rep.State, rep.ReturnsMode, rep.Note)
	}
	if rep.Returned <= wantRej {
		t.Fatalf("returned %d: the %d published past the tap were not counted (%d rejected)", rep.Returned, wantEx, wantRej)
	}
	r.WaitCount(dlq, wantEx+wantRej, 20*time.Second)
	c, err := e.svc.Check(t.Context(), rep.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Returned != wantEx+wantRej {
		t.Fatalf("check: %d back, want %d", c.Returned, wantEx+wantRej)
	}
}

// budgeted is a broker whose reads are refused by the read budget once
// refuse is set.
type budgeted struct {
	engine.Broker
	refuse atomic.Bool
}

func (b *budgeted) Scan(ctx context.Context, q string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	if b.refuse.Load() {
		return engine.ScanInfo{}, fmt.Errorf("scan %s: %w", q, engine.ErrReadBudget)
	}
	return b.Broker.Scan(ctx, q, visit)
}

func TestARereadRefusedByTheReadBudgetStopsTheReplayWithTheReason(t *testing.T) {
	t.Parallel()
	bb := &budgeted{}
	e := newTapEnv(t, testkit.Rabbit3, fast, func(d *replay.Deps) { bb.Broker = d.Broker; d.Broker = bb })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil) // re-reads: no tap can see this DLQ
	r.Reject(src, testkit.Msgs(20, 50)...)
	r.WaitCount(dlq, 20, 20*time.Second)
	p := preview(t, &e.env, engine.Selection{DLQ: dlq})
	r.Consume(src, func(amqp.Delivery) string { return "ack" })
	ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", engine.Params{Rate: -1, Timeout: 20 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	bb.refuse.Store(true)
	done := make(chan engine.Replay, 1)
	var runErr error
	go func() {
		var rep engine.Replay
		rep, runErr = e.svc.Run(t.Context(), ap.Replay.ID, "owner")
		done <- rep
	}()
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run hangs on a refused read")
	}
	// A stop by the read budget is not a fault: Run returns no error.
	if runErr != nil || rep.State != engine.StateStopped || !strings.Contains(rep.Note, "read budget exhausted") || rep.Settled != 0 {
		t.Fatalf("run: %v; %s %q settled %d: want stopped with the read budget's reason, nothing claimed settled", runErr, rep.State, rep.Note, rep.Settled)
	}
	r.WaitCount(dlq, 10, 10*time.Second) // the 10 not sent stay
}
