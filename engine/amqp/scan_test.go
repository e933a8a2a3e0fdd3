package amqp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

var queueTypes = []struct {
	name string
	args amqp.Table
}{
	{"classic", amqp.Table{"x-queue-type": "classic"}},
	{"quorum", amqp.Table{"x-queue-type": "quorum"}},
}

// scanQueueTypes adds a quorum queue with a delivery limit, where requeued
// messages go near the head rather than to the tail.
var scanQueueTypes = append(queueTypes[:len(queueTypes):len(queueTypes)], struct {
	name string
	args amqp.Table
}{"quorum-limit", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(100)}})

// TestScanLeavesQueueUnchanged scans classic and quorum DLQs, within one
// prefetch window and across several channels, and checks that visit saw
// every message in order and that the queue still holds the same messages
// in the same order with the same headers.
func TestScanLeavesQueueUnchanged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		n        int
		prefetch int
	}{
		{"one-window", 200, 0},
		{"many-windows", 300, 50},
	}
	for _, qt := range onBrokers(scanQueueTypes) {
		for _, tc := range cases {
			t.Run(qt.name+"/"+qt.on.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				e := newEnvOn(t, qt.on)
				q := e.queue("t-scan", qt.args)
				pubs := testMessages(tc.n)
				e.publish(q, pubs)
				// The scan reads what the queue says it holds as it
				// starts: wait until it says all of them (beside make
				// test's other lanes a quorum queue on 4.3 once gave a
				// scan right after the publisher's confirms nothing).
				testkit.Eventually(t, 30*time.Second, "every message ready", func() bool { return e.ready(q) == tc.n })
				b := testBroker(t, onBroker(qt.on, Config{Prefetch: tc.prefetch}))

				var seen []record
				info, err := b.Scan(context.Background(), q, func(m engine.Message) error {
					seen = append(seen, recordOf(m.Seq, m.MessageID, m.ContentType, m.Timestamp, m.Body, m.Headers))
					return nil
				})
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				if info.Read != tc.n || len(seen) != tc.n {
					t.Fatalf("Scan read %d (visited %d), want %d", info.Read, len(seen), tc.n)
				}
				if want := strings.TrimSuffix(qt.name, "-limit"); info.QueueType != want {
					t.Errorf("ScanInfo.QueueType = %q, want %q", info.QueueType, want)
				}
				if info.Duration <= 0 {
					t.Errorf("ScanInfo.Duration = %v", info.Duration)
				}
				checkSeen(t, pubs, seen)
				e.verifyIntact(q, pubs, seen)
			})
		}
	}
}

// TestScanVisitErrorMidway stops the visits at message 120 of 300 read in
// windows of 50: the error comes back as is and the queue is intact.
func TestScanVisitErrorMidway(t *testing.T) {
	t.Parallel()
	errStop := errors.New("enough")
	for _, qt := range onBrokers(scanQueueTypes) {
		t.Run(qt.name+"/"+qt.on.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, qt.on)
			q := e.queue("t-scanerr", qt.args)
			pubs := testMessages(300)
			e.publish(q, pubs)
			b := testBroker(t, onBroker(qt.on, Config{Prefetch: 50}))

			var seen []record
			info, err := b.Scan(context.Background(), q, func(m engine.Message) error {
				seen = append(seen, recordOf(m.Seq, m.MessageID, m.ContentType, m.Timestamp, m.Body, m.Headers))
				if m.Seq == 120 {
					return errStop
				}
				return nil
			})
			if !errors.Is(err, errStop) {
				t.Fatalf("Scan error = %v, want the visit's error", err)
			}
			if info.Read != 121 || len(seen) != 121 {
				t.Fatalf("Scan read %d (visited %d), want 121", info.Read, len(seen))
			}
			checkSeen(t, pubs, seen)
			e.verifyIntact(q, pubs, seen)
		})
	}
}

// TestScanContextCancelled cancels a scan of a classic queue midway: the
// error is the context's and every message is back in place.
func TestScanContextCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-scanctx", amqp.Table{"x-queue-type": "classic"})
	pubs := testMessages(150)
	e.publish(q, pubs)
	b := testBroker(t, Config{Prefetch: 40})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	visited := 0
	_, err := b.Scan(ctx, q, func(m engine.Message) error {
		if visited++; visited == 60 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan error = %v, want context.Canceled", err)
	}
	if visited < 60 || visited > 150 {
		t.Fatalf("visited %d messages", visited)
	}
	e.verifyIntact(q, pubs, nil)
}

// TestScanEmptyAndMissing covers the trivial queues.
func TestScanEmptyAndMissing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-scanempty", nil)
	b := testBroker(t, Config{})
	info, err := b.Scan(context.Background(), q, func(engine.Message) error {
		t.Fatal("visit called on an empty queue")
		return nil
	})
	if err != nil || info.Read != 0 {
		t.Fatalf("Scan of an empty queue = %+v, %v", info, err)
	}
	_, err = b.Scan(context.Background(), q+"-missing", func(engine.Message) error { return nil })
	if !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("Scan of a missing queue: %v, want ErrQueueNotFound", err)
	}
}

// TestReaderEndsShortWhenOthersTakeMessages: messages counted at the start
// but taken by another consumer end the read once the broker has none left
// for it (instead of hanging it), and the read says it was short.
func TestReaderEndsShortWhenOthersTakeMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-idle", nil)
	e.publish(q, testMessages(20))
	b := testBroker(t, Config{IdleTimeout: 300 * time.Millisecond})
	ctx := context.Background()

	r, err := b.openReader(ctx, q)
	if err != nil {
		t.Fatalf("openReader: %v", err)
	}
	if r.want != 20 {
		t.Fatalf("reader wants %d, want 20", r.want)
	}
	// Another client takes 5 messages after the reader counted them.
	other := e.channel()
	if err := other.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := other.Consume(q, "other", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		<-deliveries
	}
	n := 0
	start := time.Now()
	for {
		_, err := r.next(ctx)
		if errors.Is(err, errReadDone) {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		n++
	}
	if n != 15 {
		t.Errorf("read %d messages, want 15", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("read took %v despite a 300ms idle timeout", d)
	}
	if cv := r.coverage(-1); !cv.Short || cv.Whole() || cv.Read != 15 || cv.HeldElsewhere != 5 {
		t.Errorf("coverage %+v, want short: 15 read, 5 held elsewhere", cv)
	}
	returned, err := r.release()
	if err != nil || returned != 15 {
		t.Fatalf("release = %d, %v; want 15, nil", returned, err)
	}
	if err := other.Cancel("other", false); err != nil {
		t.Fatal(err)
	}
	if err := other.Nack(0, true, true); err != nil {
		t.Fatal(err)
	}
	e.waitReady(q, 20)
}

// TestAReadDoesNotHoldWhatItCountedAndOthersTook: another client takes 5
// messages of a classic queue after a read counted them, with basic.get
// (no consumer), and holds them; nothing is left ready and no other
// consumer is on the queue. The read must end short soon, not hold the 15
// it read for StallTimeout (2 minutes): a preview that counted a DLQ just
// before a replay's step took its picks held the replay's next picks that
// long, and the replay waited for it. On each broker.
func TestAReadDoesNotHoldWhatItCountedAndOthersTook(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-took", amqp.Table{"x-queue-type": "classic"})
		e.publish(q, testMessages(20))
		b := testBroker(t, onBroker(on, Config{}))
		ctx := context.Background()
		// The read learns the queue's type from the management API.
		testkit.Eventually(t, 30*time.Second, "the management API to know the queue", func() bool {
			_, err := b.QueueStats(ctx, q)
			return err == nil
		})
		r, err := b.openReader(ctx, q)
		if err != nil {
			t.Fatalf("openReader: %v", err)
		}
		other := e.channel()
		for i := range 5 {
			if _, ok, err := other.Get(q, false); err != nil || !ok {
				t.Fatalf("other client: get %d: %v, %v", i, ok, err)
			}
		}
		start, n := time.Now(), 0
		for {
			_, err := r.next(ctx)
			if errors.Is(err, errReadDone) {
				break
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			n++
		}
		took := time.Since(start)
		if cv := r.coverage(-1); n != 15 || !cv.Short || cv.Whole() || cv.HeldElsewhere != 5 {
			t.Errorf("read %d, coverage %+v; want 15 read, short, 5 held elsewhere", n, cv)
		}
		if took > 20*time.Second {
			t.Errorf("the read held what it had read for %v after the rest was taken; StallTimeout is %v", took, DefaultStallTimeout)
		}
		if returned, err := r.release(); err != nil || returned != 15 {
			t.Fatalf("release = %d, %v; want 15, nil", returned, err)
		}
		if err := other.Nack(0, true, true); err != nil {
			t.Fatal(err)
		}
		e.waitReady(q, 20)
	})
}

// TestReaderAckThenRelease checks the piece a Move builds on: acked
// deliveries leave the queue, the rest are given back in order.
func TestReaderAckThenRelease(t *testing.T) {
	t.Parallel()
	for _, qt := range onBrokers(scanQueueTypes) {
		t.Run(qt.name+"/"+qt.on.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, qt.on)
			q := e.queue("t-ack", qt.args)
			pubs := testMessages(120)
			e.publish(q, pubs)
			b := testBroker(t, onBroker(qt.on, Config{Prefetch: 25}))
			ctx := context.Background()
			r, err := b.openReader(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			r.paced = qt.name == "quorum-limit"
			var kept []amqp.Publishing
			for {
				h, err := r.next(ctx)
				if errors.Is(err, errReadDone) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.seq%3 == 0 {
					if err := r.ack(h); err != nil {
						t.Fatal(err)
					}
					continue
				}
				kept = append(kept, pubs[h.seq])
			}
			returned, err := r.release()
			if err != nil || returned != len(kept) {
				t.Fatalf("release = %d, %v; want %d", returned, err, len(kept))
			}
			e.verifyIntact(q, kept, nil)
		})
	}
}

// TestReadWaitsForPendingRequeues: a read of a queue this Broker gave
// messages back to waits until they show in the ready count, within
// SettleTimeout.
func TestReadWaitsForPendingRequeues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-pending", nil)
	pubs := testMessages(10)
	e.publish(q, pubs[:5])
	b := testBroker(t, Config{SettleTimeout: 20 * time.Second})
	ctx := context.Background()

	// As if the last read had given back 10 messages not yet applied: the
	// missing 5 arrive a moment after the read begins.
	b.pending.expect(q, 10)
	published := make(chan error, 1)
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-tick.C {
			b.pending.mu.Lock()
			_, pending := b.pending.n[q]
			taken := !pending
			b.pending.mu.Unlock()
			if taken { // the read has counted 5 and is waiting for 10
				break
			}
		}
		published <- publishConfirmed(e.conn, q, pubs[5:])
	}()
	info, err := b.Scan(ctx, q, func(engine.Message) error { return nil })
	if err != nil || info.Read != 10 {
		t.Fatalf("Scan = %+v, %v; want all 10 messages read", info, err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}

	// Requeues that never show delay the read by SettleTimeout and the
	// first management sample that shows them missing, not StallTimeout.
	b2 := testBroker(t, Config{SettleTimeout: 200 * time.Millisecond})
	b2.pending.n = map[string]requeueExpectation{q: {count: 1000, at: time.Now()}}
	start := time.Now()
	info, err = b2.Scan(ctx, q, func(engine.Message) error { return nil })
	if err != nil || info.Read != 10 {
		t.Fatalf("Scan = %+v, %v; want 10", info, err)
	}
	// The 990 that never showed may still be on their way: the read is not
	// a whole one, so nothing it did not see can be called missing —
	// unless a management sample newer than the give-back already counted
	// fewer (under load one comes before the read ends): they cannot land,
	// and the read of the 10 there are is whole. Never anything between.
	if cv := info.Coverage; !(cv.HeldElsewhere == 990 && !cv.Whole() || cv.HeldElsewhere == 0 && cv.Whole()) {
		t.Fatalf("coverage %+v; want 990 held elsewhere and not whole, or (a sample ruled them out) whole", cv)
	}
	// A statistics interval is 5 s; the stall bound is 2 minutes.
	if d := time.Since(start); d > 45*time.Second {
		t.Fatalf("Scan waited %v for requeues a management sample shows missing; SettleTimeout is 200ms", d)
	}

	// Given back "in the future", no management sample can rule them
	// out: the read waits until StallTimeout, and no longer. (A queue the
	// API has no sample of yet says nothing either way, and the read does
	// not wait on silence: the test waits for the first sample.)
	b3 := testBroker(t, Config{SettleTimeout: 200 * time.Millisecond, StallTimeout: time.Second})
	testkit.Eventually(t, 30*time.Second, "a management sample of the queue", func() bool {
		st, err := b3.QueueStats(ctx, q)
		return err == nil && st.Sampled
	})
	b3.pending.n = map[string]requeueExpectation{q: {count: 1000, at: time.Now().Add(time.Hour)}}
	start = time.Now()
	if info, err = b3.Scan(ctx, q, func(engine.Message) error { return nil }); err != nil || info.Read != 10 {
		t.Fatalf("Scan = %+v, %v; want 10", info, err)
	}
	if d := time.Since(start); d < time.Second || d > 45*time.Second {
		t.Fatalf("Scan waited %v for requeues no sample can rule out; want StallTimeout (1s)", d)
	}
}

// TestAClassicQueueHeldByAnotherReaderDoesNotHoldTheNextRead: this Broker
// gave 20 messages back (expected), and before a passive declare saw them
// land another client took 5 with basic.get and holds them, no consumer.
// The queue never again shows 20 ready, and the management API counts 20
// ready or unacknowledged, which on a quorum queue could be its own requeues
// still checked out. On a classic queue a sample newer than the give-back
// ends the wait: the read must end long before StallTimeout, read the 15
// there are, and count the 5 as held elsewhere (not whole), on each broker.
func TestAClassicQueueHeldByAnotherReaderDoesNotHoldTheNextRead(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-held", amqp.Table{"x-queue-type": "classic"})
		e.publish(q, testMessages(20))
		other := e.channel()
		for i := 0; i < 5; i++ {
			if _, ok, err := other.Get(q, false); err != nil || !ok {
				t.Fatalf("other reader: get %d: %v, %v", i, ok, err)
			}
		}
		const stall = 100 * time.Second
		b := testBroker(t, onBroker(on, Config{SettleTimeout: 200 * time.Millisecond, StallTimeout: stall}))
		// A queue the API has no sample of says nothing either way, and
		// the read does not wait on silence: the test waits for a sample.
		testkit.Eventually(t, 30*time.Second, "a management sample of the queue", func() bool {
			st, err := b.QueueStats(context.Background(), q)
			return err == nil && st.Sampled && st.Unacked == 5
		})
		b.pending.expect(q, 20)
		start := time.Now()
		info, err := b.Scan(context.Background(), q, func(engine.Message) error { return nil })
		if err != nil || info.Read != 15 {
			t.Fatalf("Scan = %+v, %v; want the 15 ready read", info, err)
		}
		if cv := info.Coverage; cv.Whole() || cv.HeldElsewhere < 5 {
			t.Fatalf("coverage %+v; want not whole, the 5 held elsewhere", cv)
		}
		// A fresh sample takes up to sampleAge plus an interval (5 s).
		if d := time.Since(start); d > stall/2 {
			t.Fatalf("Scan waited %v for messages another client holds; StallTimeout is %v", d, stall)
		}
		// The read's give-back reaches the queue through its own
		// connection: another connection may look a moment before it lands.
		var ready int
		testkit.Eventually(t, 20*time.Second, "the 15 read given back, the 5 still held", func() bool {
			q2, err := other.QueueDeclarePassive(q, true, false, false, false, nil)
			ready = q2.Messages
			return err == nil && ready == 15
		})
	})
}
