package amqp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestDepths: a queue's depth now is its last bucket once the management
// API has sampled it, the earlier buckets never more than it held; a
// missing queue is ErrQueueNotFound.
func TestDepths(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, testkit.Rabbit3)
	q := e.queue("t-depths", nil)
	ch, err := e.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, m := range testMessages(12) {
		if err := ch.PublishWithContext(context.Background(), "", q, false, false, m); err != nil {
			t.Fatal(err)
		}
	}
	b := testBroker(t, onBroker(testkit.Rabbit3, Config{}))
	ctx := context.Background()
	// The first sample of a new queue: past 40 s on a loaded 3.10.
	testkit.Eventually(t, 2*time.Minute, "a depth of 12", func() bool {
		got, err := b.Depths(ctx, q, time.Hour, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 60 {
			t.Fatalf("%d buckets, want 60", len(got))
		}
		for _, n := range got {
			if n > 12 {
				t.Fatalf("depths %v: more than the 12 published", got)
			}
		}
		return got[59] == 12
	})
	if _, err := b.Depths(ctx, testkit.Name("t-none"), time.Hour, time.Minute); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Errorf("a missing queue: %v", err)
	}
}
