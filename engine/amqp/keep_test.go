package amqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// keepScan is ScanKeep of q under key, visiting every message; it fails
// the test on an error and returns whether the read was kept and the ids
// visited.
func keepScan(t *testing.T, b *Broker, q, key string, ttl time.Duration) (bool, []string) {
	t.Helper()
	var ids []string
	info, kept, err := b.ScanKeep(context.Background(), q, key, ttl, func(m engine.Message) error {
		ids = append(ids, m.MessageID)
		return nil
	})
	if err != nil {
		t.Fatalf("scan keep %s: %v", q, err)
	}
	if info.Read != len(ids) {
		t.Fatalf("scan keep read %d, visited %d", info.Read, len(ids))
	}
	return kept, ids
}

// inOrder fails unless the queue gives up exactly m-0 … m-<n−1>, in order
// (it drains q).
func inOrder(t *testing.T, r *testkit.Rabbit, q string, n int) {
	t.Helper()
	r.WaitCount(q, n, 10*time.Second)
	got := r.Drain(q, n, time.Second)
	for i, d := range got {
		if d.MessageId != fmt.Sprintf("m-%d", i) {
			t.Fatalf("position %d holds %s, want m-%d: not given back in order", i, d.MessageId, i)
		}
	}
	if len(got) != n {
		t.Fatalf("the queue holds %d, want %d", len(got), n)
	}
}

// TestAKeptReadIsTheCursorsRead keeps a whole read of a classic queue of
// 30 (read in windows of 8) and takes it over as a cursor: while kept, the
// queue holds nothing ready (the read holds it all); the cursor's move
// offers the 30 in order without one more delivery from the broker, sends
// the ones picked and holds the rest, which its release gives back in
// order.
func TestAKeptReadIsTheCursorsRead(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.QueueOf(testkit.Name("keep"), nil, 30, 50)
	tgt := r.Queue(testkit.Name("keep-tgt"), nil)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8})
	key := testkit.Name("replay")
	kept, ids := keepScan(t, b, q, key, time.Minute)
	if !kept || len(ids) != 30 {
		t.Fatalf("kept %v after visiting %d: want a kept read of 30", kept, len(ids))
	}
	if ready, _ := r.Look(q); ready != 0 {
		t.Fatalf("the queue holds %d ready while its read is kept: want 0", ready)
	}
	if _, ok := b.TakeKept("another-"+key, q); ok {
		t.Fatal("a read was taken under a key it was not kept under")
	}
	c, ok := b.TakeKept(key, q)
	if !ok {
		t.Fatal("the kept read could not be taken")
	}
	defer func() { _, _ = c.Release() }()
	if _, again := b.TakeKept(key, q); again {
		t.Fatal("a kept read was taken twice")
	}
	var offered []string
	mr, err := c.Move(context.Background(), engine.MoveRequest{
		Queue: q,
		Pick: func(m engine.Message) (engine.Pick, bool) {
			offered = append(offered, m.MessageID)
			if len(offered)%3 == 1 {
				return engine.Pick{ID: m.MessageID, Target: tgt}, true
			}
			return engine.Pick{}, false
		},
	})
	if err != nil || len(mr.Sent) != 10 {
		t.Fatalf("move: %d sent, %v: want 10", len(mr.Sent), err)
	}
	for i, id := range offered {
		if id != fmt.Sprintf("m-%d", i) {
			t.Fatalf("offered %v: want m-0 … m-29 in order", offered)
		}
	}
	if len(offered) != 30 || mr.Read != 0 {
		t.Fatalf("offered %d, read %d more: want the 30 the kept read saw, none read again", len(offered), mr.Read)
	}
	if n := b.Delivered(q); n != 30 {
		t.Fatalf("the broker delivered %d messages from the queue, want 30: each read once", n)
	}
	if n, err := c.Release(); err != nil || n != 20 {
		t.Fatalf("release gave back %d, %v: want 20", n, err)
	}
	if n := r.Count(tgt); n != 10 {
		t.Fatalf("the target holds %d, want 10", n)
	}
	r.WaitCount(q, 20, 10*time.Second)
	for i, d := range r.Drain(q, 20, time.Second) {
		if want := fmt.Sprintf("m-%d", i+1+i/2); d.MessageId != want {
			t.Fatalf("position %d holds %s, want %s: not given back in order", i, d.MessageId, want)
		}
	}
}

// TestAKeptReadIsGivenBackInOrder keeps reads no one takes: one given back
// by DropKept, one by its ttl, one by Close, one taken for another queue
// than it read; each time the queue holds all its messages again, in
// order, with no consumer left on it.
func TestAKeptReadIsGivenBackInOrder(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8})
	fill := func() string {
		q := r.QueueOf(testkit.Name("keep"), nil, 20, 50)
		return q
	}
	back := func(q, how string) {
		t.Helper()
		eventually(t, 10*time.Second, "the kept read given back ("+how+")", func() bool {
			ready, consumers := r.Look(q)
			return ready == 20 && consumers == 0
		})
		inOrder(t, r, q, 20)
	}

	q, key := fill(), testkit.Name("replay")
	if kept, _ := keepScan(t, b, q, key, time.Minute); !kept {
		t.Fatal("a whole read of a classic queue was not kept")
	}
	b.DropKept(key)
	if ready, consumers := r.Look(q); ready != 20 || consumers != 0 {
		t.Fatalf("right after DropKept the queue holds %d ready with %d consumer(s): want 20, none", ready, consumers)
	}
	back(q, "DropKept")

	q, key = fill(), testkit.Name("replay")
	if kept, _ := keepScan(t, b, q, key, 200*time.Millisecond); !kept {
		t.Fatal("not kept")
	}
	back(q, "its ttl")
	if _, ok := b.TakeKept(key, q); ok {
		t.Fatal("a read given back after its ttl was taken")
	}

	q, key = fill(), testkit.Name("replay")
	if kept, _ := keepScan(t, b, q, key, time.Minute); !kept {
		t.Fatal("not kept")
	}
	if _, ok := b.TakeKept(key, "another-queue"); ok {
		t.Fatal("a read of one queue was taken as another's")
	}
	back(q, "taken for another queue")

	q, key = fill(), testkit.Name("replay")
	closing := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8})
	if kept, _ := keepScan(t, closing, q, key, time.Minute); !kept {
		t.Fatal("not kept")
	}
	_ = closing.Close()
	back(q, "Close")
}

// TestAReadIsKeptOnlyWhereACursorMayHoldIt scans queues whose reads must
// not be kept: a quorum queue (a cursor's give-back there spends a
// delivery attempt of every message), and a classic queue another
// consumer holds messages of (the read is not whole). ScanKeep gives each
// back, as Scan does, and nothing can be taken.
func TestAReadIsKeptOnlyWhereACursorMayHoldIt(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8, QuietWait: 200 * time.Millisecond})

	// notKept scans q, whose want ready messages the scan can see, and
	// checks that its read was not kept but given back: q holds want ready
	// again, with only the consumers other clients have on it.
	notKept := func(q, what string, want, consumers int) {
		t.Helper()
		key := testkit.Name("replay")
		if kept, ids := keepScan(t, b, q, key, time.Minute); kept || len(ids) != want {
			t.Fatalf("%s: kept %v after visiting %d: want %d visited, not kept", what, kept, len(ids), want)
		}
		if _, ok := b.TakeKept(key, q); ok {
			t.Fatalf("%s: a read that was not kept was taken", what)
		}
		eventually(t, 30*time.Second, what+": the read given back", func() bool {
			ready, n := r.Look(q)
			return ready == want && n == consumers
		})
	}

	qq := r.Queue(testkit.Name("keep-qq"), testkit.Quorum(nil))
	r.Publish(qq, testkit.Msgs(20, 50)...)
	r.WaitCount(qq, 20, 10*time.Second)
	notKept(qq, "a quorum queue", 20, 0)

	q := r.QueueOf(testkit.Name("keep-other"), nil, 20, 50)
	// Another client consumes the queue and holds the first five unacked.
	other := r.Channel()
	if err := other.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := other.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		<-ds
	}
	notKept(q, "a classic queue beside another reader", 15, 1)
}

// TestAKeptReadWhoseConnectionWasLostIsNotTaken keeps a read, then the
// broker closes the reader's connection (as a node restart would): the
// broker gives the 20 back itself, in order, and the read cannot be taken
// as a cursor, so a run reads afresh instead of moving what it no longer
// holds.
func TestAKeptReadWhoseConnectionWasLostIsNotTaken(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.QueueOf(testkit.Name("keep"), nil, 20, 50)
	name := testkit.Name("keep-conn")
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8, ConnectionName: name})
	key := testkit.Name("replay")
	if kept, _ := keepScan(t, b, q, key, time.Minute); !kept {
		t.Fatal("a whole read of a classic queue was not kept")
	}
	eventually(t, 30*time.Second, "the management API to list the reader's connection", func() bool {
		return testkit.CountConnections(t, name) > 0
	})
	if n := testkit.CloseConnections(t, name); n == 0 {
		t.Fatal("no connection closed")
	}
	eventually(t, 10*time.Second, "the broker to give the read back", func() bool {
		ready, consumers := r.Look(q)
		return ready == 20 && consumers == 0
	})
	eventually(t, 10*time.Second, "the client to see its connection closed", func() bool {
		b.kept.mu.Lock()
		defer b.kept.mu.Unlock()
		k := b.kept.m[key]
		return k != nil && k.c.r.conn.IsClosed()
	})
	if c, ok := b.TakeKept(key, q); ok {
		_, _ = c.Release()
		t.Fatal("a read whose connection was lost was taken")
	}
	inOrder(t, r, q, 20)
}

// TestAReadOverItsBoundIsNotKept scans a classic queue of 70 messages of
// 1 MiB, more than a kept read may hold (keepBytes, 64 MiB), although its
// count is within keepMost: ScanKeep visits all 70, keeps none, nothing
// can be taken, and the queue gives up all 70 again, in order, with no
// consumer left on it.
func TestAReadOverItsBoundIsNotKept(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 8, QuietWait: 200 * time.Millisecond})
	const n = 70
	q := r.QueueOf(testkit.Name("keep-big"), nil, n, 1<<20)
	key := testkit.Name("replay")
	if kept, ids := keepScan(t, b, q, key, time.Minute); kept || len(ids) != n {
		t.Fatalf("kept %v after visiting %d: want all %d visited, not kept", kept, len(ids), n)
	}
	if _, ok := b.TakeKept(key, q); ok {
		t.Fatal("a read that was not kept was taken")
	}
	eventually(t, 30*time.Second, "the read given back", func() bool {
		ready, consumers := r.Look(q)
		return ready == n && consumers == 0
	})
	inOrder(t, r, q, n)
}
