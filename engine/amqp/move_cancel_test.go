package amqp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestACancelBeforeAPublishLeavesItsCopyUnsent: the move's context ends
// between the pacer and the 13th publish of a batch of 30. The library
// sends nothing once its context is done, so that copy and the 17 behind
// it are Unsent (certainly not sent), never "lost" (in doubt); the 12
// published before are confirmed and their originals acked. The broker
// decides: the target holds exactly the 12 Sent, the DLQ exactly the 18
// Unsent, none of them in the target.
func TestACancelBeforeAPublishLeavesItsCopyUnsent(t *testing.T) {
	t.Parallel()
	r := testkit.Dial(t)
	q := r.QueueOf(testkit.Name("cancel"), nil, 30, 50)
	tgt := r.Queue(testkit.Name("cancel-tgt"), nil)
	b := testBroker(t, Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paced := 0
	mr, err := b.Move(ctx, engine.MoveRequest{
		Queue: q,
		Pick: func(m engine.Message) (engine.Pick, bool) {
			return engine.Pick{ID: m.MessageID, Target: tgt}, true
		},
		// The pacer is asked right before each publish: on the 13th it
		// ends the context and lets the publish go ahead unpaced.
		Pace: func() float64 {
			if paced++; paced == 13 {
				cancel()
			}
			return 0
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("move: %v; want context.Canceled", err)
	}
	for _, f := range mr.Failed {
		t.Errorf("copy %s reported %v (%s); a publish refused for its context is unsent", f.Moved.ID, f.Kind, f.Detail)
	}
	if len(mr.Sent) != 12 || len(mr.Unsent) != 18 || len(mr.Unacked) != 0 {
		t.Fatalf("sent %d, unsent %d, unacked %d; want 12, 18, 0", len(mr.Sent), len(mr.Unsent), len(mr.Unacked))
	}
	r.WaitCount(tgt, 12, 20*time.Second)
	r.WaitCount(q, 18, 20*time.Second)
	got := map[string]bool{}
	for _, d := range r.Drain(tgt, 12, 10*time.Second) {
		got[d.MessageId] = true
	}
	for i := 0; i < 12; i++ {
		if id := fmt.Sprintf("m-%d", i); !got[id] || mr.Sent[i].ID != id {
			t.Fatalf("the target holds %v and Sent[%d] is %s; want m-0 … m-11 in both", got, i, mr.Sent[i].ID)
		}
	}
	left := map[string]bool{}
	for _, d := range r.Drain(q, 18, 10*time.Second) {
		left[d.MessageId] = true
	}
	for _, u := range mr.Unsent {
		if !left[u.ID] || got[u.ID] {
			t.Fatalf("unsent %s: in the DLQ %v, in the target %v; want only in the DLQ", u.ID, left[u.ID], got[u.ID])
		}
	}
	if len(left) != 18 {
		t.Fatalf("the DLQ holds %d distinct messages, want 18", len(left))
	}
}
