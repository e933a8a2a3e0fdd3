package replay_test

import (
	"context"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// stamps is a consumer that records when each copy arrived.
type stamps struct {
	mu sync.Mutex
	at []time.Time
}

func (s *stamps) handle(amqp.Delivery) string {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return "ack"
}

func (s *stamps) get() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// pacedReplay fills a DLQ with n messages and starts an approved replay of
// them in one step at rate, returning the replay id and the arrivals.
func pacedReplay(b *testing.B, n int, rate float64) (*env, string, *stamps, chan engine.Replay) {
	b.Helper()
	e := newEnvB(b)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(n, 256)...)
	r.WaitCount(dlq, n, time.Minute)
	p, err := e.svc.Preview(context.Background(), engine.Selection{DLQ: dlq}, "U")
	if err != nil {
		b.Fatal(err)
	}
	st := &stamps{}
	r.Consume(src, st.handle)
	ap, err := replay.Approve(e.svc, context.Background(), p.Token, "U", engine.Params{Step: n, Cap: n, Rate: rate, Timeout: time.Minute}, false)
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(context.Background(), ap.Replay.ID, "owner"); done <- rep }()
	return e, ap.Replay.ID, st, done
}

// BenchmarkPacing measures how closely rate=R holds over 30 s (arrivals at
// the target consumer, first to last).
func BenchmarkPacing(b *testing.B) {
	const rate, seconds = 100.0, 30
	for i := 0; i < b.N; i++ {
		n := int(rate * seconds)
		_, _, st, done := pacedReplay(b, n, rate)
		rep := <-done
		if rep.State != engine.StateFinished {
			b.Fatalf("replay %s: %s", rep.State, rep.Note)
		}
		testkit.Eventually(b, time.Minute, "all delivered", func() bool { return len(st.get()) == n })
		at := st.get()
		got := float64(n-1) / at[n-1].Sub(at[0]).Seconds()
		b.ReportMetric(rate, "target-msgs/s")
		b.ReportMetric(got, "achieved-msgs/s")
		b.ReportMetric(100*(got-rate)/rate, "error-%")
	}
}

// BenchmarkStopLatency measures the time from a pause or cancel request to
// the last copy the target receives, at rate=200.
func BenchmarkStopLatency(b *testing.B) {
	for _, verb := range []string{"pause", "cancel"} {
		b.Run(verb, func(b *testing.B) {
			var worst, sum time.Duration
			for i := 0; i < b.N; i++ {
				e, id, st, done := pacedReplay(b, 2000, 200)
				testkit.Eventually(b, 20*time.Second, "200 delivered", func() bool { return len(st.get()) >= 200 })
				asked := time.Now()
				var err error
				if verb == "pause" {
					_, err = e.svc.Control(context.Background(), id, engine.ControlPause, "bench")
				} else {
					_, err = e.svc.Control(context.Background(), id, engine.ControlCancel, "bench")
				}
				if err != nil {
					b.Fatal(err)
				}
				<-done
				// Copies already sent may still arrive: wait for quiet.
				n := len(st.get())
				testkit.Eventually(b, 10*time.Second, "arrivals to stop", func() bool {
					time.Sleep(300 * time.Millisecond) // observation window, not synchronisation
					m := len(st.get())
					quiet := m == n
					n = m
					return quiet
				})
				at := st.get()
				lag := at[len(at)-1].Sub(asked)
				sum += lag
				worst = max(worst, lag)
			}
			b.ReportMetric(float64(sum.Milliseconds())/float64(b.N), "mean-ms")
			b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
		})
	}
}
