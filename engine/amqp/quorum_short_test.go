package amqp

import (
	"context"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestBackToBackScansOfTwoWindowsAreWhole scans a queue of two windows
// (6,000 in make test; 20,000 with DLQBOT_100K_ALL=1) twice in a row (five
// times with DLQBOT_100K_ALL=1) through one Broker, with a busy loop
// loading one core, and checks against the broker that each scan read
// every message and said so (or, while the previous scan's give-back has
// not shown yet, said what it could not see), never ending short, and
// that the queue still holds them all.
//
// It covers two ways a quorum read went wrong on RabbitMQ 3.10 under
// load. A quorum queue keeps counting a cancelled consumer until its
// deliveries are settled: with the second window checked out to the read
// but not yet arrived (ready 0, consumers 2, 1 of them active), the read
// took its own first window's consumer for another reader and ended short,
// calling the rest "held by another client" (before: 10,000 of 20,000 at
// once here; 16,780 of 20,000 in a replay test). And a management sample
// is dated up to an interval ahead of when it was taken: one from before
// the previous scan (nothing unacknowledged) passed for proof that that
// scan's give-back had landed, and a read of the queue, whose requeues had
// not shown yet, read 0 and called it whole.
func TestBackToBackScansOfTwoWindowsAreWhole(t *testing.T) {
	t.Parallel()
	// make test runs the quorum case on 3.10 with two scans (it shows both
	// faults), beside its other lanes, which load the machine as the
	// faults need; DLQBOT_100K_ALL=1 adds 4.0 and 4.3, classic queues,
	// five scans and a goroutine that keeps one core busy, as other work
	// on the machine does (about 8 minutes under load).
	all := os.Getenv("DLQBOT_100K_ALL") != ""
	scans := 2
	if all {
		scans = 5
		var stop atomic.Bool
		t.Cleanup(func() { stop.Store(true) })
		go func() {
			runtime.LockOSThread()
			for !stop.Load() { // load one core
			}
		}()
	}
	for _, qt := range onBrokers(queueTypes) {
		t.Run(qt.name+"-"+qt.on.Name, func(t *testing.T) {
			if qt.name == "classic" && !all {
				t.Skip("classic queues with DLQBOT_100K_ALL=1: the faults were quorum-only")
			}
			if qt.on.Name != testkit.Rabbit3.Name && !all {
				t.Skip("RabbitMQ 4.x with DLQBOT_100K_ALL=1: the faults were 3.10's")
			}
			t.Parallel()
			e := newEnvOn(t, qt.on)
			q := e.queue("t-2win", qt.args)
			n, window := 6000, 3000 // two windows; 20,000 of 10,000 with DLQBOT_100K_ALL=1
			if all {
				n, window = 20000, 10000
			}
			e.publish(q, testMessages(n))
			e.waitReady(q, n)
			// A short idle time probes the broker often: the gap between a
			// window's checkout and its arrival is then always probed.
			b := testBroker(t, onBroker(qt.on, Config{Prefetch: window, IdleTimeout: 2 * time.Millisecond}))
			for i := range scans {
				info, err := b.Scan(context.Background(), q, func(engine.Message) error { return nil })
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("scan %d: read %d in %s, coverage %+v", i+1, info.Read, info.Duration.Round(time.Millisecond), info.Coverage)
				// No other reader exists: the read never ends short. It is
				// whole, or — when the previous scan's give-back has not
				// shown yet — says honestly how much it could not see.
				cv := info.Coverage
				whole := info.Read == n && cv.Whole() && cv.Queued == n
				honest := !cv.Whole() && cv.Queued == n && info.Read+cv.HeldElsewhere == n && i > 0
				if cv.Short || !(whole || honest) {
					t.Fatalf("scan %d read %d, coverage %+v; want all %d, whole (or, after a scan, the rest said held)", i+1, info.Read, cv, n)
				}
			}
			e.waitReady(q, n)
			if got := len(e.readAll(q)); got != n {
				t.Fatalf("the queue holds %d after the scans, want %d", got, n)
			}
		})
	}
}
