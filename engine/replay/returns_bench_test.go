package replay_test

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// lookTimer adds up the time a run spends looking for returns: reading the
// tap and its record (tap mode) or re-reading the DLQ (reread mode).
type lookTimer struct {
	engine.Taps
	engine.Returns
	mu    sync.Mutex
	spent time.Duration
	calls int
	on    bool
	// counting is the time spent reading the DLQ's count for the tap's
	// bypass check.
	counting time.Duration
}

func (l *lookTimer) time(start time.Time) {
	l.mu.Lock()
	if l.on {
		l.spent += time.Since(start)
		l.calls++
	}
	l.mu.Unlock()
}

func (l *lookTimer) DrainTap(ctx context.Context, dlq string, rec func([]engine.Message) error) (int, error) {
	defer l.time(time.Now())
	return l.Taps.DrainTap(ctx, dlq, rec)
}

func (l *lookTimer) Returned(ctx context.Context, id string, from int) (engine.ReturnRecord, error) {
	defer l.time(time.Now())
	return l.Returns.Returned(ctx, id, from)
}

func (l *lookTimer) Arrived(ctx context.Context, dlq string) (int64, error) {
	defer l.time(time.Now())
	return l.Returns.Arrived(ctx, dlq)
}

// scanTimer is a broker whose scans, and inspections of the DLQ (the
// tap's bypass check), are timed by l while it is on.
type scanTimer struct {
	engine.Broker
	l   *lookTimer
	dlq *string
}

func (s scanTimer) Inspect(ctx context.Context, q string) (engine.QueueInfo, error) {
	if q == *s.dlq {
		start := time.Now()
		defer func() {
			s.l.mu.Lock()
			if s.l.on {
				s.l.counting += time.Since(start)
			}
			s.l.mu.Unlock()
		}()
	}
	return s.Broker.Inspect(ctx, q)
}

func (s scanTimer) Scan(ctx context.Context, q string, visit func(engine.Message) error) (engine.ScanInfo, error) {
	defer s.l.time(time.Now())
	return s.Broker.Scan(ctx, q, visit)
}

// moveTimer times the step's move (not a look for returns).
type moveTimer struct {
	engine.Mover
	spent *time.Duration
}

func (m moveTimer) Move(ctx context.Context, req engine.MoveRequest) (engine.MoveResult, error) {
	start := time.Now()
	defer func() { *m.spent += time.Since(start) }()
	return m.Mover.Move(ctx, req)
}

// BenchmarkReturnsLookup measures the cost of looking for returns during
// one 10-message step whose 10 copies all come back, on a DLQ of 1,000
// and of DLQBOT_BENCH_RETURNS_LARGE (default 100,000) messages, with the
// tap and with re-reads (a DLQ fed through the default exchange). It
// reports the whole run (step-ms: move, settle with its 3 s grace, looks),
// the move alone (move-ms), and the time spent looking for returns
// (look-ms) and how often, and apart from it the time the tap's bypass
// check spent reading the DLQ's count (bypass-count-ms: it waits up to 1 s,
// twice a step, for a count still moving after a read to hold still).
func BenchmarkReturnsLookup(b *testing.B) {
	large := 100000
	if v, err := strconv.Atoi(os.Getenv("DLQBOT_BENCH_RETURNS_LARGE")); err == nil && v > 0 {
		large = v
	}
	for _, mode := range []engine.ReturnsMode{engine.ReturnsTap, engine.ReturnsReread} {
		for _, size := range []int{1000, large} {
			b.Run(string(mode)+"/dlq="+strconv.Itoa(size), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					returnsLookupOnce(b, mode, size)
				}
			})
		}
	}
}

func returnsLookupOnce(b *testing.B, mode engine.ReturnsMode, size int) {
	b.StopTimer()
	ctx := context.Background()
	lt := &lookTimer{}
	var moving time.Duration
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	e := newTapEnv(b, testkit.Rabbit3, replay.Config{}, func(d *replay.Deps) {
		d.Mover = moveTimer{Mover: d.Mover, spent: &moving}
		lt.Taps, lt.Returns = d.Taps, d.Returns
		d.Taps, d.Returns = lt, lt
		d.Broker = scanTimer{Broker: d.Broker, l: lt, dlq: &dlq}
	})
	r := e.rabbit
	exchange := ""
	if mode == engine.ReturnsTap {
		exchange = r.DLXTopology(src, dlq, nil)
	} else {
		r.Topology(src, dlq, nil)
	}
	// The step's 10 at the head, dead-lettered by the broker; the rest
	// of the DLQ behind them.
	r.Reject(src, testkit.Msgs(10, 100)...)
	r.WaitCount(dlq, 10, time.Minute)
	filler := make([]amqp.Publishing, 0, 10000)
	for i := 10; i < size; i++ {
		filler = append(filler, testkit.Msg("f-"+strconv.Itoa(i), testkit.Body(i, 100), nil))
		if len(filler) == cap(filler) || i == size-1 {
			if err := testkit.PublishTo(r.Conn, exchange, dlq, filler...); err != nil {
				b.Fatal(err)
			}
			filler = filler[:0]
		}
	}
	r.WaitCount(dlq, size, 10*time.Minute)
	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq, Source: src, Limit: 10}, "U")
	if err != nil || p.Selected != 10 {
		b.Fatalf("preview: %v (%d selected)", err, p.Selected)
	}
	r.Consume(src, func(amqp.Delivery) string { return "reject" })
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U", engine.Params{Step: 10, Cap: 10, Rate: -1, Timeout: time.Minute}, false)
	if err != nil {
		b.Fatal(err)
	}
	lt.mu.Lock()
	lt.on = true
	lt.mu.Unlock()
	b.StartTimer()
	start := time.Now()
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	took := time.Since(start)
	b.StopTimer()
	if err != nil || rep.ReturnsMode != mode {
		b.Fatalf("run: %v, %s, %d back, mode %s", err, rep.State, rep.Returned, rep.ReturnsMode)
	}
	if rep.Returned != 10 {
		// Reported, not fatal: a re-read that misses returns is a finding.
		b.Logf("%s: %d of the 10 returns found; the run ended %s (%s)", b.Name(), rep.Returned, rep.State, rep.Note)
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	b.ReportMetric(float64(took.Milliseconds()), "step-ms")
	b.ReportMetric(float64(moving.Milliseconds()), "move-ms")
	b.ReportMetric(float64(lt.spent.Microseconds())/1000, "look-ms")
	b.ReportMetric(float64(lt.calls), "look-calls")
	b.ReportMetric(float64(lt.counting.Milliseconds()), "bypass-count-ms")
	b.ReportMetric(float64(rep.Returned), "returned")
}
