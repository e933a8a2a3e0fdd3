package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// cutAfterConfirm is the real mover whose first confirmed batch is
// followed by the loss of every connection named conn, before the
// originals can be acked.
type cutAfterConfirm struct {
	engine.Mover
	t    *testing.T
	conn string
	once sync.Once
	// first is how many copies the first confirmed batch held, and
	// confirmed how many all batches held: those the broker confirmed
	// (under load more batches came in before the cut took effect).
	mu               sync.Mutex
	first, confirmed int
}

func (c *cutAfterConfirm) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	next := req.Confirmed
	req.Confirmed = func(ctx context.Context, batch []engine.Moved) error {
		if next != nil {
			if err := next(ctx, batch); err != nil {
				return err
			}
		}
		c.mu.Lock()
		c.confirmed += len(batch)
		c.mu.Unlock()
		c.once.Do(func() {
			c.first = len(batch)
			testkit.CloseConnections(c.t, c.conn)
			// The broker drops a connection once the client answered its
			// close: by then the client knows its channels are gone.
			testkit.Eventually(c.t, 20*time.Second, "the connection to close", func() bool { return testkit.CountConnections(c.t, c.conn) == 0 })
		})
		return nil
	}
	return c.Mover.Move(ctx, req)
}

// Copies the broker confirmed into the parking queue were moved, even when
// their originals could not be acked (the connection was lost): Park
// counts them as parked (and as duplicates), not "could not be moved".
func TestParkCountsConfirmedCopiesAsMoved(t *testing.T) {
	t.Parallel()
	conn := testkit.Name("conn")
	b, err := broker.New(broker.Config{URL: testkit.AMQPURL, ManagementURL: testkit.ManagementURL, ConnectionName: conn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cut := &cutAfterConfirm{Mover: b, t: t, conn: conn}
	e := newEnvWith(t, fast, func(d *replay.Deps) {
		d.Broker, d.Counters = b, b
		d.Mover = cut
	})
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	ctx := context.Background()
	id := engine.NewReplayID()
	if err := e.store.Replays().Create(ctx, engine.Replay{ID: id, DLQ: dlq, State: engine.StateStopped}); err != nil {
		t.Fatal(err)
	}
	// Ten copies of this replay that came back for the third time.
	var msgs []amqp.Publishing
	for _, m := range testkit.Msgs(10, 50) {
		m.Headers = amqp.Table{"x-replay-id": id, "x-replay-count": int32(3)}
		msgs = append(msgs, m)
	}
	r.Reject(src, msgs...)
	r.WaitCount(dlq, 10, 20*time.Second)
	parking := engine.ParkingQueue(dlq)
	defer testkit.DeleteQueue(parking)
	testkit.Eventually(t, 20*time.Second, "the engine's connection in the management API", func() bool {
		_, _ = b.Inspect(ctx, dlq)
		return testkit.CountConnections(t, conn) > 0
	})

	res, err := e.svc.Park(ctx, id, "U_PARK")
	t.Logf("park: %+v, %v", res, err)
	testkit.Eventually(t, 20*time.Second, "the originals back in the DLQ", func() bool { return r.Count(dlq) == 10 })
	// The first confirmed batch is all ten on a quiet machine, fewer under
	// load: what counts is that exactly the confirmed copies are parked.
	inParking := r.Count(parking)
	cut.mu.Lock()
	confirmed := cut.confirmed
	cut.mu.Unlock()
	// A copy in doubt (published, its confirm lost with the connection)
	// may have reached the parking queue too.
	if cut.first == 0 || inParking < confirmed || inParking > confirmed+res.InDoubt {
		t.Fatalf("parking queue holds %d, want the %d confirmed copies and at most the %d in doubt", inParking, confirmed, res.InDoubt)
	}
	if res.Failed != 0 || res.Parked != confirmed || res.Duplicates != confirmed {
		t.Fatalf("park reported %d parked, %d duplicates, %d could not be moved: the broker confirmed %d into %s (it holds %d) and the 10 originals are in the DLQ",
			res.Parked, res.Duplicates, res.Failed, confirmed, parking, inParking)
	}
}
