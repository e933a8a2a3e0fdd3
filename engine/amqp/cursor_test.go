package amqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestCursorContinuesOneRead moves from one cursor three times over a
// queue of 30 read in windows of 6: each move reads on from where the last
// stopped (the deliveries the broker made prove nothing is read twice), a
// message kept for later (Pick.Later) is offered first to the next move,
// and the release gives the 25 not moved back in their order.
func TestCursorContinuesOneRead(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.QueueOf(testkit.Name("cur"), nil, 30, 50)
	tgt := r.Queue(testkit.Name("cur-tgt"), nil)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, Prefetch: 6})
	ctx := context.Background()
	c, err := b.OpenCursor(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Release() }()
	move := func(want []string, later ...string) engine.MoveResult {
		t.Helper()
		left := map[string]bool{}
		for _, id := range want {
			left[id] = true
		}
		var offered []string
		mr, err := c.Move(ctx, engine.MoveRequest{
			Queue: q,
			Pick: func(m engine.Message) (engine.Pick, bool) {
				offered = append(offered, m.MessageID)
				if left[m.MessageID] {
					delete(left, m.MessageID)
					return engine.Pick{ID: m.MessageID, Target: tgt}, true
				}
				for _, id := range later {
					if id == m.MessageID {
						return engine.Pick{Later: true}, false
					}
				}
				return engine.Pick{}, false
			},
			Satisfied: func() bool { return len(left) == 0 },
		})
		if err != nil || len(mr.Sent) != len(want) {
			t.Fatalf("move of %v: sent %d, %v (offered %v)", want, len(mr.Sent), err, offered)
		}
		return mr
	}
	if mr := move([]string{"m-0", "m-5"}, "m-3"); mr.Read != 6 {
		t.Fatalf("first move read %d, want 6 (m-0 … m-5)", mr.Read)
	}
	if mr := move([]string{"m-3", "m-8"}); mr.Read != 3 {
		t.Fatalf("second move read %d, want 3 (m-6 … m-8, m-3 from what the cursor kept)", mr.Read)
	}
	if mr := move([]string{"m-29"}); mr.Read != 21 || !c.Done() {
		t.Fatalf("third move read %d (done %v), want the other 21 to the end", mr.Read, c.Done())
	}
	if h := c.Held(); h != 25 {
		t.Fatalf("the cursor holds %d, want 25", h)
	}
	// The broker delivered each of the 30 once, counted as the deliveries
	// arrived (the management API's deliver_get can drop a channel's last
	// counts when it closes between two samples).
	if n := b.Delivered(q); n != 30 {
		t.Fatalf("the broker delivered %d messages from the queue, want 30: each message read once", n)
	}
	if n, err := c.Release(); err != nil || n != 25 {
		t.Fatalf("release gave back %d, %v: want 25", n, err)
	}
	r.WaitCount(q, 25, 10*time.Second)
	left := r.Drain(q, 25, time.Second)
	sent := map[int]bool{0: true, 3: true, 5: true, 8: true, 29: true}
	i := 0
	for _, d := range left {
		for sent[i] {
			i++
		}
		if d.MessageId != fmt.Sprintf("m-%d", i) {
			t.Fatalf("given back out of order: %s where m-%d belongs", d.MessageId, i)
		}
		i++
	}
	if len(left) != 25 || r.Count(tgt) != 5 {
		t.Fatalf("queue gave back %d (want 25), target holds %d (want 5)", len(left), r.Count(tgt))
	}
	for _, d := range left {
		if !d.Redelivered {
			t.Fatalf("%s given back without the redelivered flag: the cursor's read of it is not on record", d.MessageId)
		}
	}
}
