package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

func TestWorkersRecordEveryRegisteredTap(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, b testkit.Broker) {
		t.Parallel()
		e := newTapEnv(t, b, fast, nil)
		r := e.rabbit
		src, dlq := testkit.Name("src"), testkit.Name("dlq")
		r.DLXTopology(src, dlq, nil)
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		if _, err := e.broker.EnsureTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Returns().AddTap(ctx, dlq); err != nil {
			t.Fatal(err)
		}
		// Two workers compete for the tap; each message is recorded once.
		done := make(chan struct{}, 2)
		for i := 0; i < 2; i++ {
			go func() { replay.DrainTaps(e.svc, ctx, 20*time.Millisecond); done <- struct{}{} }()
		}
		r.Reject(src, testkit.Msgs(700, 20)...)
		testkit.Eventually(t, 20*time.Second, "700 arrivals recorded", func() bool {
			n, _ := e.store.Returns().Arrived(ctx, dlq)
			return n >= 700
		})
		if n, _ := e.store.Returns().Arrived(ctx, dlq); n != 700 {
			t.Fatalf("%d arrivals recorded, want 700 (each once)", n)
		}
		testkit.Eventually(t, 10*time.Second, "the tap empty", func() bool { return r.Count("dlqbot.tap."+dlq) == 0 })
		r.WaitCount(dlq, 700, 20*time.Second) // the tap takes nothing from the DLQ
		// A tap the broker deleted (x-expires) is unregistered.
		if _, err := r.Channel().QueueDelete("dlqbot.tap."+dlq, false, false, false); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the deleted tap unregistered", func() bool {
			qs, _ := e.store.Returns().Tapped(ctx)
			return len(qs) == 0
		})
		stop()
		<-done
		<-done
	})
}
