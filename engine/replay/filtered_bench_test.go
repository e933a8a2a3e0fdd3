package replay_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// BenchmarkFilteredReplay measures, in the same run, a filtered replay of
// a tenth of a DLQ of DLQBOT_BENCH_MESSAGES dead letters (every tenth from
// one source; the default steps, unpaced) against a one-pass filtered
// mover written here: it reads every message of an identical DLQ once,
// republishes the selected with confirms, acks each original once its copy
// is confirmed and gives the rest back. Both are exact or the benchmark
// fails. It reports each one's time and deliveries from its DLQ, counted
// where they arrive (amqp.Broker.Delivered for dlqbot's; the mover counts
// its own): dlqbot's replay (approval → finished), and apart its
// preview's and its approval's compare.
//
//	DLQBOT_BENCH_MESSAGES=100000 go test ./engine -run '^$' -bench BenchmarkFilteredReplay -benchtime 1x -timeout 60m
//
// The mover holds what it passes in windows of DLQBOT_BENCH_MOVER_WINDOW
// (default 10,000, the window of dlqbot's reads), a channel each: RabbitMQ
// 3.10 pays for an ack by its own tag in proportion to what its channel
// holds, so a mover holding everything on one channel
// (DLQBOT_BENCH_MOVER_WINDOW=0) slows as it goes (234 s for 100,000 here).
//
// The engine runs the tests' short settle grace and polls (fast, with the
// product's StepChunk) unless DLQBOT_BENCH_DEFAULTS=1, which runs the
// product's defaults.
//
// DLQBOT_BENCH_DEFAULT_EXCHANGE=1 feeds dlqbot's DLQ through the default
// exchange (x-dead-letter-exchange ""): no tap can be bound, and the replay
// finds returns at its cursor's tail (engine/settle_tail.go).
//
// DLQBOT_BENCH_STEP and DLQBOT_BENCH_CAP set the replay's step= and cap=
// (default: the default steps); DLQBOT_BENCH_STEP=100000
// DLQBOT_BENCH_CAP=100000 at 1,000,000 replays the selection in one step.
func BenchmarkFilteredReplay(b *testing.B) {
	n := benchEnvInt(b, "DLQBOT_BENCH_MESSAGES", 100000)
	on := testkit.Rabbit3
	on.Require(b)
	cfg := fast
	cfg.Tune.StepChunk = 0 // the product's chunk: the tests' small one exercises chunking, at a round trip per 64 copies
	if os.Getenv("DLQBOT_BENCH_DEFAULTS") != "" {
		cfg = replay.Config{} // the product's settle grace and polls
	}
	f := fillFilteredVia(b, on, nil, n, cfg, os.Getenv("DLQBOT_BENCH_DEFAULT_EXCHANGE") != "")
	r := f.e.rabbit
	mdlq, mwork := r.Queue(testkit.Name("mdlq"), nil), r.Queue(testkit.Name("mwork"), nil)
	fillTenth(r, mdlq, mwork, n)
	mgot := &counter{}
	r.Consume(mwork, mgot.handle)
	ctx := context.Background()
	selected := n / 10
	b.ResetTimer()

	// The one-pass mover first: what dlqbot's replay is measured against.
	start := time.Now()
	moved, mdelivered, err := filteredMove(ctx, r.Conn, mdlq, mwork, n, benchEnvInt(b, "DLQBOT_BENCH_MOVER_WINDOW", 10000))
	moverTook := time.Since(start)
	if err != nil || moved != selected {
		b.Fatalf("one-pass mover moved %d of %d: %v", moved, selected, err)
	}
	testkit.Eventually(b, time.Minute, "the mover's copies to arrive", func() bool { return mgot.n.Load() == int64(selected) })
	r.WaitCount(mdlq, n-selected, time.Minute)

	d0 := f.deliveries()
	p, err := f.e.svc.Preview(ctx, engine.Selection{DLQ: f.dlq, Source: f.work}, "U_BENCH")
	if err != nil || p.Selected != selected {
		b.Fatalf("preview: %v (selected %d of %d)", err, p.Selected, selected)
	}
	d1 := f.deliveries()
	start = time.Now()
	params := engine.Params{Rate: -1, Step: benchEnvInt(b, "DLQBOT_BENCH_STEP", 0), Cap: benchEnvInt(b, "DLQBOT_BENCH_CAP", 0)}
	ap, err := replay.Approve(f.e.svc, ctx, p.Token, "U_APP", params, false)
	if err != nil {
		b.Fatalf("approve: %v", err)
	}
	approveTook := time.Since(start)
	d2 := f.deliveries()
	start = time.Now()
	rep, err := f.e.svc.Run(ctx, ap.Replay.ID, "owner")
	runTook := time.Since(start)
	if err != nil || rep.State != engine.StateFinished || rep.Sent != selected {
		b.Fatalf("replay: %v: %s, sent %d of %d: %s", err, rep.State, rep.Sent, selected, rep.Note)
	}
	testkit.Eventually(b, time.Minute, "the replay's copies to arrive", func() bool { return f.got.n.Load() == int64(selected) })
	d3 := f.deliveries()
	b.StopTimer()
	b.ReportMetric(moverTook.Seconds(), "mover-s")
	b.ReportMetric(float64(mdelivered), "mover-deliveries")
	b.ReportMetric(runTook.Seconds(), "dlqbot-s")
	b.ReportMetric(float64(d3-d2), "dlqbot-deliveries")
	b.ReportMetric(float64(rep.Step), "steps")
	b.ReportMetric(approveTook.Seconds(), "approve-s")
	b.ReportMetric(float64(d1-d0), "preview-deliveries")
	b.ReportMetric(float64(d2-d1), "approve-deliveries")
	b.ReportMetric(runTook.Seconds()/moverTook.Seconds(), "time-ratio-dlqbot/mover")
	b.ReportMetric((approveTook+runTook).Seconds()/moverTook.Seconds(), "time-ratio-approve+run/mover")
	b.ReportMetric(float64(d3-d2)/float64(n), "deliveries/DLQ")
}

// filteredMove is the one-pass filtered mover: it reads the n messages of
// dlq once, republishes those that died in work to work with confirms (at
// most 500 unconfirmed), acks each original once its copy is confirmed,
// and gives the rest back with one nack(multiple, requeue) per channel
// after cancelling its consumers. It holds what it passes in windows of
// window deliveries, a channel and consumer each (the next consumer starts
// once a window has been delivered), as dlqbot's own reads do; window 0
// holds everything on one channel with no prefetch limit. It returns how
// many it moved and how many deliveries it received from dlq.
func filteredMove(ctx context.Context, conn *amqp.Connection, dlq, work string, n, window int) (int, int64, error) {
	var delivered atomic.Int64
	moved, err := filteredMoveCounting(ctx, conn, dlq, work, n, window, &delivered)
	return moved, delivered.Load(), err
}

func filteredMoveCounting(ctx context.Context, conn *amqp.Connection, dlq, work string, n, window int, delivered *atomic.Int64) (int, error) {
	out, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	defer out.Close()
	if err := out.Confirm(false); err != nil {
		return 0, err
	}
	type delivery struct {
		amqp.Delivery
		ch int
	}
	type reader struct {
		ch  *amqp.Channel
		tag string
		got int
	}
	var readers []*reader
	defer func() {
		for _, r := range readers {
			r.ch.Close()
		}
	}()
	merged := make(chan delivery, 1024)
	open := func() error { // a channel and consumer for the next window
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		r := &reader{ch: ch, tag: testkit.Name("mover")}
		readers = append(readers, r)
		if err := ch.Qos(window, 0, false); err != nil {
			return err
		}
		ds, err := ch.Consume(dlq, r.tag, false, false, false, false, nil)
		if err != nil {
			return err
		}
		k := len(readers) - 1
		go func() {
			for d := range ds {
				delivered.Add(1)
				merged <- delivery{d, k}
			}
		}()
		return nil
	}
	if err := open(); err != nil {
		return 0, err
	}
	type pending struct {
		dc  *amqp.DeferredConfirmation
		ch  int
		tag uint64
	}
	var flight []pending
	settle := func(wait int) error { // confirm and ack the oldest, waiting while more than wait are in flight
		for len(flight) > 0 {
			f := flight[0]
			if len(flight) <= wait {
				select {
				case <-f.dc.Done():
				default:
					return nil
				}
			}
			if ok, err := f.dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("copy not confirmed: %v", err)
			}
			if err := readers[f.ch].ch.Ack(f.tag, false); err != nil {
				return err
			}
			flight = flight[1:]
		}
		return nil
	}
	moved := 0
	for read := 0; read < n; read++ {
		var d delivery
		select {
		case d = <-merged:
		case <-ctx.Done():
			return moved, ctx.Err()
		case <-time.After(time.Minute):
			return moved, errors.New("no delivery for a minute")
		}
		if r := readers[d.ch]; window > 0 && d.ch == len(readers)-1 {
			if r.got++; r.got == window && read+1 < n {
				if err := open(); err != nil {
					return moved, err
				}
			}
		}
		if src, _ := d.Headers["x-first-death-queue"].(string); src != work {
			continue
		}
		dc, err := out.PublishWithDeferredConfirmWithContext(ctx, "", work, true, false, amqp.Publishing{
			Headers: d.Headers, ContentType: d.ContentType, DeliveryMode: d.DeliveryMode, MessageId: d.MessageId, Body: d.Body})
		if err != nil {
			return moved, err
		}
		flight = append(flight, pending{dc, d.ch, d.DeliveryTag})
		moved++
		if err := settle(500); err != nil {
			return moved, err
		}
	}
	if err := settle(0); err != nil {
		return moved, err
	}
	// Cancelled first, so that nothing given back is delivered again.
	for _, r := range readers {
		if err := r.ch.Cancel(r.tag, false); err != nil {
			return moved, err
		}
	}
	for _, r := range readers {
		if err := r.ch.Nack(0, true, true); err != nil {
			return moved, err
		}
	}
	return moved, nil
}
