package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTerminalPreviewBesideAnotherReaderEndsAtOnce: a terminal preview of
// a DLQ that another client consumes meanwhile (prefetch 5, 5 ms of work
// per message, about 200 a second, from before the preview until after
// it) still ends within seconds: the wait for what its read gave back
// (awaitGiveBacks) stops once the queue shows a consumer, which may take
// or hold those messages for as long as it likes (or once the count has
// stood still and the management API says the rest cannot land), instead
// of waiting giveBackWait for a ready count that will not come back
// (64 s with both turned off). And nothing is
// lost or doubled: each of the 3,000 ids is either acknowledged by the
// other reader or still in the DLQ, once. On a classic and on a quorum
// DLQ, each on the broker testkit.ClassicOn and QuorumOn pick (every
// broker with DLQBOT_CLASSIC_ALL=1).
func TestTerminalPreviewBesideAnotherReaderEndsAtOnce(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name string
		on   []testkit.Broker
	}{{"classic", testkit.ClassicOn(t.Name())}, {"quorum", testkit.QuorumOn(t.Name())}} {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testkit.EachBrokerIn(t, kind.on, func(t *testing.T, on testkit.Broker) {
				t.Parallel()
				previewBesideAnotherReader(t, on, amqp.Table{"x-queue-type": kind.name})
			})
		})
	}
}

func previewBesideAnotherReader(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
	const n = 3000
	env := testEnvOn(t, on)
	r := on.Dial(t)
	_, dlq := r.DeadLetteredAs(dlqArgs, n, 100)

	ch := r.Channel()
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	tag := testkit.Name("other")
	ds, err := ch.Consume(dlq, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		taken = map[string]int{}
	)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for d := range ds {
			time.Sleep(5 * time.Millisecond) // the other reader's work
			if d.Ack(false) == nil {
				mu.Lock()
				taken[d.MessageId]++
				mu.Unlock()
			}
		}
	}()
	testkit.Eventually(t, 30*time.Second, "the other reader takes its first messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(taken) > 0
	})

	start := time.Now()
	out, stderr, code := dlqbot(t, env, "preview", dlq, "--json")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("preview beside another reader: exit %d\n%s\n%s", code, out, stderr)
	}
	doc := oneJSON(t, out)
	// awaitQuiet's QuietWait (3 s) before the read, the read, consumerGrace
	// (2 s) after it: far from giveBackWait.
	if took > giveBackWait/2 {
		t.Fatalf("the preview took %v beside another reader; its wait for its give-back should end about consumerGrace after its read, far within giveBackWait (%v)\n%s", took, giveBackWait, stderr)
	}
	mu.Lock()
	during := len(taken)
	mu.Unlock()
	if during >= n {
		t.Fatalf("the other reader took all %d before the preview ended: the preview's wait was never beside it", n)
	}

	// The other reader stops; whatever it held unacknowledged goes back.
	if err := ch.Cancel(tag, false); err != nil {
		t.Fatal(err)
	}
	<-stopped
	_ = ch.Close()
	mu.Lock()
	defer mu.Unlock()
	rest := r.Drain(dlq, n-len(taken), 5*time.Second)
	seen := map[string]int{}
	for id, c := range taken {
		seen[id] += c
	}
	for _, d := range rest {
		seen[d.MessageId]++
	}
	for i := range n {
		if id := fmt.Sprintf("m-%d", i); seen[id] != 1 {
			t.Fatalf("%s: acknowledged by the other reader or left in the DLQ %d time(s), want once (other reader %d, DLQ %d of %d)", id, seen[id], len(taken), len(rest), n)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct ids between the other reader and the DLQ, want %d", len(seen), n)
	}
	t.Logf("preview in %v beside another reader (%d taken while it ran, %v selected); then the reader had %d, the DLQ %d", took.Round(time.Millisecond), during, doc["selected"], len(taken), len(rest))
}
