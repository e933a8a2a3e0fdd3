package amqp

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

func TestWatchTapRecordsArrivalsAndNoticesTheTapsDeletionAtOnce(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, tb testkit.Broker) {
		t.Parallel()
		ctx := context.Background()
		r := tb.Dial(t)
		b := testBroker(t, onBroker(tb, Config{}))
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		tap := TapName(dlq)
		t.Cleanup(func() { r.DeleteQueue(tap) })
		if err := b.WatchTap(ctx, dlq, nil); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("watch of a missing tap: %v, want ErrQueueNotFound", err)
		}
		if _, err := b.EnsureTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		ids := map[string]int{}
		done := make(chan error, 1)
		go func() {
			done <- b.WatchTap(ctx, dlq, func(ms []engine.Message) error {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range ms {
					ids[m.MessageID]++
				}
				return nil
			})
		}()
		const n = 300
		r.Reject(src, testkit.Msgs(n, 20)...)
		testkit.Eventually(t, 20*time.Second, "the watch to record every dead letter", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ids) == n
		})
		// Decided by the broker: the tap is empty, the DLQ untouched.
		r.WaitCount(tap, 0, 10*time.Second)
		// The DLQ's count can trail the tap's deliveries for a moment (two
		// queues of one routing; 290 of 300 once beside make test's other
		// lanes): polled, not read once.
		testkit.Eventually(t, 10*time.Second, "the DLQ to hold every dead letter", func() bool { return r.Count(dlq) == n })
		mu.Lock()
		for id, c := range ids {
			if c != 1 {
				t.Errorf("%s recorded %d times", id, c)
			}
		}
		mu.Unlock()
		deleted := time.Now()
		if err := tb.DeleteQueueHTTP(tap); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, engine.ErrQueueNotFound) {
				t.Fatalf("watch ended with %v, want ErrQueueNotFound", err)
			}
			t.Logf("the watch noticed the deletion %s after the management API answered", time.Since(deleted).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatal("the watch did not notice the tap's deletion")
		}
		// A drain of the deleted tap says it is missing too.
		if _, err := b.DrainTap(ctx, dlq, func([]engine.Message) error { return nil }); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("drain after the deletion: %v, want ErrQueueNotFound", err)
		}
		// A watch ended by its context gives back what it holds and
		// returns nil.
		if _, err := b.EnsureTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() { done <- b.WatchTap(wctx, dlq, func([]engine.Message) error { return nil }) }()
		testkit.Eventually(t, 10*time.Second, "the watch's consumer", func() bool {
			q, err := b.mgmt.queue(ctx, tap, false)
			return err == nil && q.Consumers == 1
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("watch ended by its context: %v", err)
		}
	})
}
