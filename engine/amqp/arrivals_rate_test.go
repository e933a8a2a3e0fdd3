package amqp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestArrivals: messages published into a queue show in its last bucket
// of arrivals once the management API has counted them, never more than
// were published; a missing queue is ErrQueueNotFound.
func TestArrivals(t *testing.T) {
	t.Parallel()
	e := newEnvOn(t, testkit.Rabbit3)
	q := e.queue("t-arrivals", nil)
	ch, err := e.conn.Channel() // stays open: its statistics feed the counter
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
	var got []int
	testkit.Eventually(t, 40*time.Second, "12 arrivals counted", func() bool {
		got, err = b.Arrivals(ctx, q, time.Hour, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, n := range got {
			sum += n
		}
		if sum > 12 || len(got) != 60 {
			t.Fatalf("arrivals %v: more than the 12 published, or not 60 buckets", got)
		}
		return sum == 12 && got[58]+got[59] == 12
	})
	if _, err := b.Arrivals(ctx, testkit.Name("t-none"), time.Hour, time.Minute); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Errorf("a missing queue: %v", err)
	}
}
