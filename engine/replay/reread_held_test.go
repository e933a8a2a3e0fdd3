package replay_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// A run that finds returns by re-reading its DLQ (dead letters through the
// default exchange: no tap) cannot see returns another consumer of the DLQ
// holds. Here that consumer starts at the replay's first copy and takes the
// 5 copies the handler rejects as they come back: the run's last look must
// not finish on "0 came back", but stop and say why; check, once the other
// consumer let go, counts all 5 from the whole DLQ. It waits out the last
// judgement's patience (15 s): on one broker (make test-all: each).
func TestARereadThatCannotSeeTheWholeDLQClaimsNothing(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		const n, back = 20, 5
		e := newTapEnv(t, b, graceful, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.Topology(src, dlq, nil) // dead letters go through the default exchange only
		r.Reject(src, testkit.Msgs(n, 50)...)
		r.WaitCount(dlq, n, 20*time.Second)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		if p.Returns.Mode != engine.ReturnsReread {
			t.Fatalf("preview returns %+v: want re-reads", p.Returns)
		}
		holder := holdAtFirstCopy(t, r, src, dlq, back, nil, rejectEvery(n/back))
		ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", oneStep, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, _ := e.svc.Run(t.Context(), ap.Replay.ID, "owner") // stopped: its error says why
		if rep.Sent != n || rep.State != engine.StateStopped || rep.ReturnsMode != engine.ReturnsReread ||
			strings.Contains(rep.Note, "came back") || !strings.Contains(rep.Note, "could not tell") {
			t.Fatalf("replay %s sent %d returned %d mode %q note %q: want stopped on a last re-read that could not tell, all sent",
				rep.State, rep.Sent, rep.Returned, rep.ReturnsMode, rep.Note)
		}
		c := releaseAndCheck(t, &e.env, holder, dlq, rep.ID, back)
		if c.Returned != back {
			t.Fatalf("check: %d back, want %d", c.Returned, back)
		}
	})
}

// The same after a window without the tap: the re-read that reconciles it
// cannot see the returns another consumer holds, so the copies sent stay
// "could not tell" (Replay.Unseen), never "0 came back"; check, once the
// other consumer let go, counts the 5 from the whole DLQ.
func TestAReconcileThatCannotSeeTheWholeDLQLeavesTheCopiesUnseen(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		const n, back = 20, 5
		e := newTapEnv(t, b, graceful, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		tap := dlqamqp.TapName(dlq)
		t.Cleanup(func() { r.DeleteQueue(tap) })
		r.Reject(src, testkit.Msgs(n, 50)...)
		r.WaitCount(dlq, n, 20*time.Second)
		p := preview(t, &e.env, engine.Selection{DLQ: dlq})
		if p.Returns.Mode != engine.ReturnsTap {
			t.Fatalf("preview returns %+v: want the tap", p.Returns)
		}
		holder := holdAtFirstCopy(t, r, src, dlq, back, func() {
			if err := b.DeleteQueueHTTP(tap); err != nil {
				t.Errorf("delete tap: %v", err)
			}
		}, rejectEvery(n/back))
		ap, err := replay.Approve(e.svc, t.Context(), p.Token, "U_APP", oneStep, false)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(t.Context(), ap.Replay.ID, "owner")
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		t.Logf("replay %s: %d returned, unseen %+v: %s", rep.State, rep.Returned, rep.Unseen, rep.Note)
		if rep.Sent != n || rep.Unseen == nil || rep.Returned+rep.Unseen.Count < back || strings.Contains(rep.Note, " 0 came back") {
			t.Fatalf("replay %s sent %d: %d returned, unseen %+v (%s): want the copies it could not see named unseen", rep.State, rep.Sent, rep.Returned, rep.Unseen, rep.Note)
		}
		c := releaseAndCheck(t, &e.env, holder, dlq, rep.ID, back)
		if c.Returned != back || c.Unseen != nil {
			t.Fatalf("check: %d back, unseen %+v; want %d, nothing unseen", c.Returned, c.Unseen, back)
		}
	})
}

// releaseAndCheck closes holder (holdAtFirstCopy's), waits until dlq
// holds the back messages it held again, and returns what a check of
// replay id then finds.
func releaseAndCheck(t *testing.T, e *env, holder *amqp.Channel, dlq, id string, back int) engine.CheckReport {
	t.Helper()
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	e.rabbit.WaitCount(dlq, back, 30*time.Second)
	c, err := e.svc.Check(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// holdAtFirstCopy consumes src with handle and, at its first delivery,
// runs first (when set) and starts another consumer on dlq that holds up
// to hold messages unacknowledged until its channel, returned, is closed.
func holdAtFirstCopy(t *testing.T, r *testkit.Rabbit, src, dlq string, hold int, first func(), handle func(amqp.Delivery) string) *amqp.Channel {
	t.Helper()
	holder := r.Channel()
	var once sync.Once
	r.Consume(src, func(d amqp.Delivery) string {
		once.Do(func() {
			if first != nil {
				first()
			}
			if err := holder.Qos(hold, 0, false); err != nil {
				t.Errorf("holder: qos: %v", err)
			}
			if _, err := holder.Consume(dlq, "holder", false, false, false, false, nil); err != nil {
				t.Errorf("holder: consume: %v", err)
			}
		})
		return handle(d)
	})
	return holder
}

// rejectEvery is a handler that rejects the copies of m-0, m-k, m-2k… and
// acks the rest.
func rejectEvery(k int) func(amqp.Delivery) string {
	return func(d amqp.Delivery) string {
		if i, _ := strconv.Atoi(strings.TrimPrefix(d.MessageId, "m-")); i%k == 0 {
			return "reject"
		}
		return "ack"
	}
}
