package integration_test

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// benchQueues are the benchmark's queues, shared by its runs and deleted
// by TestMain.
var (
	benchOnce            sync.Once
	benchSrc, benchDLQ   string
	benchFixtureErr      error
	benchFixtureMessages int
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDLQ != "" {
		testkit.DeleteQueue(benchDLQ)
		testkit.DeleteQueue(benchSrc)
	}
	os.Exit(code)
}

// benchFixture declares a DLQ holding n dead letters (with the broker's
// x-death headers, as if rejected from a source queue) once per process.
func benchFixture(n int) (string, error) {
	benchOnce.Do(func() {
		conn, err := amqp.Dial(testkit.AMQPURL)
		if err != nil {
			benchFixtureErr = err
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			benchFixtureErr = err
			return
		}
		defer ch.Close()
		benchSrc, benchDLQ = testkit.Name("bsrc"), testkit.Name("bdlq")
		for _, q := range []string{benchSrc, benchDLQ} {
			if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				benchFixtureErr = err
				return
			}
		}
		died := time.Now().Add(-time.Hour)
		msgs := make([]amqp.Publishing, n)
		for i := range msgs {
			msgs[i] = testkit.Msg(fmt.Sprintf("m-%d", i), testkit.Body(i, 200), amqp.Table{
				"x-death": []any{amqp.Table{"queue": benchSrc, "reason": "rejected", "count": int64(1), "time": died,
					"exchange": "", "routing-keys": []any{benchSrc}}},
				"x-first-death-queue": benchSrc, "x-first-death-reason": "rejected", "x-first-death-exchange": "",
			})
		}
		benchFixtureErr = testkit.PublishTo(conn, "", benchDLQ, msgs...)
		benchFixtureMessages = n
	})
	return benchDLQ, benchFixtureErr
}

// BenchmarkSlashCommandAckWhilePreviewing measures how long the bot takes
// to acknowledge a slash command (`/dlq list`, signed, over HTTP) while
// previews of a large DLQ (DLQBOT_BENCH_MESSAGES, default 100,000) run one
// after another in the background. It reports the p50 and p99 ack latency
// in milliseconds (ns/op is the 20 ms pacing between commands, not a
// cost). Run it with a fixed count, for example
//
//	go test ./integration -run '^$' -bench SlashCommandAck -benchtime 300x
func BenchmarkSlashCommandAckWhilePreviewing(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("DLQBOT_BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	dlq, err := benchFixture(n)
	if err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, options{})

	// Keep a preview of the whole DLQ running, one after another.
	stop := make(chan struct{})
	var previews, previewNanos atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			before := len(e.stub.Messages(channel))
			began := time.Now()
			resp, err := e.stub.SlashCommand(e.srv.URL, "/dlq", "preview "+dlq, "U0BENCHER1", channel)
			if err != nil {
				b.Error(err)
				return
			}
			_ = resp.Body.Close()
			for len(e.stub.Messages(channel)) == before {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond): // polling for the posted preview
				}
			}
			previews.Add(1)
			previewNanos.Add(int64(time.Since(began)))
		}
	}()

	lat := make([]time.Duration, 0, b.N)
	tick := time.NewTicker(20 * time.Millisecond) // 50 commands a second
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-tick.C
		start := time.Now()
		resp, err := e.stub.SlashCommand(e.srv.URL, "/dlq", "list", "U0BENCHER1", channel)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(previews.Load()), "previews-done")
	if n := previews.Load(); n > 0 {
		b.ReportMetric(time.Duration(previewNanos.Load()/n).Seconds(), "s/preview")
	}
	b.ReportMetric(float64(benchFixtureMessages), "dlq-messages")
}
