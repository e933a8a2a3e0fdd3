package replay_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestACancelMidStepCountsTheCopiesThatCameBackAsTheDLQHoldsThem holds
// "came back" to the DLQ after a cancel in the middle of a step: a paced
// step of 300 is cancelled once 60 copies reached a consumer that
// dead-letters every third one (the rest it acks). The copies sent before
// the cancel are watched for the step's grace, so the cancelled record,
// the run's own answer and check each count as many back as the copies
// carrying the replay's x-replay-id the test then drains from the DLQ, and
// as the consumer rejected. On every broker, classic and quorum DLQs, with
// returns found through a tap and by re-reads.
func TestACancelMidStepCountsTheCopiesThatCameBackAsTheDLQHoldsThem(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"tap", "reread"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			everyDLQKind(t, func(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
				cancelMidStep(t, on, dlqArgs, mode == "tap")
			})
		})
	}
}

// rejecter is a target consumer that dead-letters every third message id
// ("m-<i>", i divisible by 3) and acks the rest, counting per verdict the
// copies carrying x-replay-id replay.
type rejecter struct {
	mu                      sync.Mutex
	replay                  string
	copies, rejected, other int
}

func (rj *rejecter) handle(d amqp.Delivery) string {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	if rid, _ := d.Headers["x-replay-id"].(string); rid != rj.replay {
		rj.other++
		return "ack"
	}
	rj.copies++
	i, err := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-"))
	if err == nil && i%3 == 0 {
		rj.rejected++
		return "reject"
	}
	return "ack"
}

func (rj *rejecter) counts() (copies, rejected, other int) {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	return rj.copies, rj.rejected, rj.other
}

func cancelMidStep(t *testing.T, on testkit.Broker, dlqArgs amqp.Table, tapped bool) {
	const n = 300
	ctx := context.Background()
	var e *env
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	if tapped {
		te := newTapEnv(t, on, graceful, nil)
		e = &te.env
		e.rabbit.DLXTopology(src, dlq, dlqArgs)
	} else {
		e, _ = newFaultEnv(t, on, false, graceful)
		e.rabbit.Topology(src, dlq, dlqArgs)
	}
	r := e.rabbit
	r.Reject(src, testkit.Msgs(n, 100)...)
	r.WaitCount(dlq, n, 30*time.Second)
	pv := preview(t, e, engine.Selection{DLQ: dlq})
	ap, err := replay.Approve(e.svc, ctx, pv.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: 100, Timeout: 30 * time.Second}, true)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	rj := &rejecter{replay: id}
	r.Consume(src, rj.handle)
	start := time.Now()
	done := runAsync(t, e, id)
	testkit.Eventually(t, 30*time.Second, "60 copies at the consumer", func() bool { c, _, _ := rj.counts(); return c >= 60 })
	if _, err := e.svc.Control(ctx, id, engine.ControlCancel, "U_CANCELLER"); err != nil {
		t.Fatal(err)
	}
	var rep engine.Replay
	select {
	case rep = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled run did not end within 30 s")
	}
	took := time.Since(start)
	if rep.State != engine.StateCancelled || rep.Sent == 0 || rep.Sent >= n {
		t.Fatalf("the run ended %s with %d of %d sent (%q): want cancelled mid-step", rep.State, rep.Sent, n, rep.Note)
	}
	// The broker's final state: every copy sent handled by the consumer,
	// the DLQ holding the originals never sent and the copies it rejected.
	var rejected int
	testkit.Eventually(t, 30*time.Second, "the consumer done and the DLQ holding what it rejected", func() bool {
		var copies int
		copies, rejected, _ = rj.counts()
		return copies >= rep.Sent && r.Count(src) == 0 && r.Count(dlq) == n-rep.Sent+rejected
	})
	c, err := e.svc.Check(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := e.svc.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	copies, _, other := rj.counts()
	back := 0
	for _, d := range r.Drain(dlq, n-rep.Sent+rejected, 10*time.Second) {
		if rid, _ := d.Headers["x-replay-id"].(string); rid == id {
			back++
		}
	}
	t.Logf("%s: cancelled after %d of %d sent (%s); the consumer got %d copies (%d others), rejected %d; the DLQ held %d copies of the replay; record %d back, run %d, check %d (mode %s)",
		on.Name, rep.Sent, n, took.Round(time.Millisecond), copies, other, rejected, back, cur.Returned, rep.Returned, c.Returned, cur.ReturnsMode)
	if copies != rep.Sent || other != 0 {
		t.Errorf("the consumer got %d copies of the replay and %d other messages, the replay sent %d", copies, other, rep.Sent)
	}
	if back == 0 || back != rejected {
		t.Fatalf("the DLQ held %d copies of the replay, the consumer rejected %d: want as many, and some", back, rejected)
	}
	if cur.State != engine.StateCancelled || cur.Returned != back || rep.Returned != back || c.Returned != back {
		t.Errorf("%d copies came back (the DLQ's own count); the cancelled record (%s) says %d, the run %d, check %d: want all equal",
			back, cur.State, cur.Returned, rep.Returned, c.Returned)
	}
}
