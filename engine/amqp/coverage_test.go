package amqp

import (
	"context"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestReadDoesNotEndOnAPause: with an idle time far shorter than the
// broker's pauses (each new window's consumer start, a loaded machine), a
// scan still reads every message: it ends by the queue's count, never by a
// pause in deliveries (before: it ended at the first pause and said
// nothing, as a 1,000,000-message preview that covered 37%).
func TestReadDoesNotEndOnAPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-pause", nil)
	const n = 6000
	e.publish(q, testMessages(n))
	b := testBroker(t, Config{Prefetch: 500, IdleTimeout: time.Millisecond})
	info, err := b.Scan(context.Background(), q, func(engine.Message) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if info.Read != n || !info.Coverage.Whole() || info.Coverage.Queued != n {
		t.Fatalf("scan read %d, coverage %+v; want all %d, whole", info.Read, info.Coverage, n)
	}
	e.waitReady(q, n)
}

// TestBackToBackScansSeeEverything scans a classic queue three times in a
// row through one Broker. The broker answers a passive declare ahead of
// the previous scan's requeues still waiting in the queue's mailbox, so a
// scan that trusted the ready count at once would read only part of the
// queue (measured: 10,000 of 30,000 on a loaded machine); the requeues of
// the previous read are waited for, on classic queues too.
func TestBackToBackScansSeeEverything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-b2b", nil)
	const n = 6000
	e.publish(q, testMessages(n))
	b := testBroker(t, Config{Prefetch: 500})
	for i := range 3 {
		info, err := b.Scan(context.Background(), q, func(engine.Message) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if info.Read != n {
			t.Fatalf("scan %d read %d of %d", i+1, info.Read, n)
		}
	}
	e.waitReady(q, n)
}
