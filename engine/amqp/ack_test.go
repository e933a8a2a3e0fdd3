package amqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAckAllNeverCoversAHole acks, in two batches and out of order, the
// copies of 7 of 12 held messages across two channels: multiple acks may
// collapse runs, but the 5 held and not acked must all come back, in order.
func TestAckAllNeverCoversAHole(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.QueueOf(testkit.Name("ack"), nil, 12, 50)
	b, err := New(Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	rd, err := b.openReader(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	var hs []held
	for {
		h, err := rd.next(ctx)
		if err != nil {
			break
		}
		hs = append(hs, h)
	}
	if len(hs) != 12 {
		t.Fatalf("read %d, want 12", len(hs))
	}
	// Channel 1 holds m-0..m-5, channel 2 m-6..m-11. Holes: 3, 4, 7, 10, 11.
	first := []held{hs[5], hs[0], hs[2], hs[1], hs[8]}
	second := []held{hs[6], hs[9]}
	if n, err := rd.ackAll(first); err != nil || n != 5 {
		t.Fatalf("ackAll first: %d, %v", n, err)
	}
	if n, err := rd.ackAll(second); err != nil || n != 2 {
		t.Fatalf("ackAll second: %d, %v", n, err)
	}
	if _, err := rd.release(); err != nil {
		t.Fatal(err)
	}
	r.WaitCount(q, 5, 10*time.Second)
	left := r.Drain(q, 5, time.Second)
	want := []int{3, 4, 7, 10, 11}
	for i, d := range left {
		if d.MessageId != fmt.Sprintf("m-%d", want[i]) {
			t.Fatalf("message %d is %s, want m-%d (left %d)", i, d.MessageId, want[i], len(left))
		}
	}
}
