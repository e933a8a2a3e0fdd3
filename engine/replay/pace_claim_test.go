package replay_test

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestAutoPaceSaysWhatTheConsumerAcknowledges holds rate=auto's words to
// the consumer: 900 dead letters replayed with rate=auto max=200 to a
// consumer that acks about 50 msg/s (prefetch 5, 20 ms of work each),
// which records when it acked each copy. While the replay sends, the test
// reads the replay's stated pace (Replay.Pace, "pacing to the consumer: N
// msg/s") and the target's ready count (passive declare) every 250 ms.
//
// The pacer (engine/pacer.go) sets its rate to the acks it measures plus the gap
// between its backlog and one second of them, so at most twice the acks
// (plus the minimum backlog of 5), and halves it above two seconds of them:
// the stated pace, over the samples, has a median within a factor 2 (and
// the backlog's 5 a second) of what the consumer acked in the two seconds
// before each; and the ready
// count stays under two seconds of the consumer's acks plus one sample
// window (500 ms) of sending at up to twice them, that is three seconds of
// its acks, plus the minimum backlog. On one broker, a different one as
// the test's name changes (testkit.ClassicOn): the pacer reads passive
// declares only, the same on every broker version.
func TestAutoPaceSaysWhatTheConsumerAcknowledges(t *testing.T) {
	t.Parallel()
	testkit.EachBrokerIn(t, testkit.ClassicOn(t.Name()), func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		autoPaceAgainstConsumer(t, on)
	})
}

// ackClock is a consumer's record of when it acked each message.
type ackClock struct {
	mu sync.Mutex
	at []time.Time
}

func (a *ackClock) acked(at time.Time) {
	a.mu.Lock()
	a.at = append(a.at, at)
	a.mu.Unlock()
}

// count is how many acks it made.
func (a *ackClock) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.at)
}

// rate is the acks per second in (to-d, to].
func (a *ackClock) rate(to time.Time, d time.Duration) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	from := to.Add(-d)
	i := sort.Search(len(a.at), func(i int) bool { return a.at[i].After(from) })
	j := sort.Search(len(a.at), func(i int) bool { return a.at[i].After(to) })
	return float64(j-i) / d.Seconds()
}

// paceSample is what the test read at one moment of the replay.
type paceSample struct {
	at    time.Time
	sent  int
	pace  float64 // the stated pace, <0 when the pacer was not measuring
	ready int
}

var paceWords = regexp.MustCompile(`^pacing to the consumer: ([0-9.]+) msg/s`)

func autoPaceAgainstConsumer(t *testing.T, on testkit.Broker) {
	const n = 900
	ctx := context.Background()
	e := newEnvOn(t, fast, on)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(n, 128)...)
	r.WaitCount(dlq, n, time.Minute)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	acks := &ackClock{}
	slowConsumer(t, r, src, func(time.Duration) { acks.acked(time.Now()) })
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Auto: true, Max: 200, Step: 100, Cap: n, Timeout: time.Minute}, false)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done := runAsync(t, e, ap.Replay.ID)
	samples := samplePace(t, e, ap.Replay.ID, src, done)
	rep := samples.rep
	took := time.Since(start)
	if rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("replay %s, sent %d of %d: %s", rep.State, rep.Sent, n, rep.Note)
	}
	testkit.Eventually(t, 30*time.Second, "the consumer acked every copy", func() bool { return acks.count() >= n })
	expectPaceAsAcked(t, samples.s, acks, took)
}

// sampled is what samplePace read, and the replay's final record.
type sampled struct {
	s   []paceSample
	rep engine.Replay
}

// samplePace reads replay id's record and target's ready count every
// 250 ms until the run ends (done).
func samplePace(t *testing.T, e *env, id, target string, done <-chan engine.Replay) sampled {
	t.Helper()
	ctx := context.Background()
	ch := e.rabbit.Channel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var out sampled
	for deadline := time.After(3 * time.Minute); ; {
		select {
		case out.rep = <-done:
			return out
		case <-deadline:
			t.Fatal("the replay did not finish within 3 minutes (a consumer of 900 alone takes about 20 s)")
		case <-tick.C:
		}
		cur, err := e.svc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ch.QueueDeclarePassive(target, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := paceSample{at: time.Now(), sent: cur.Sent, pace: -1, ready: q.Messages}
		if m := paceWords.FindStringSubmatch(cur.Pace); m != nil {
			s.pace, _ = strconv.ParseFloat(m[1], 64)
		}
		out.s = append(out.s, s)
	}
}

// expectPaceAsAcked compares the samples taken while the replay sent (its
// Sent grew since the sample before) with the consumer's acks.
func expectPaceAsAcked(t *testing.T, samples []paceSample, acks *ackClock, took time.Duration) {
	t.Helper()
	var ratios []float64
	worst, capacity := 0, 0.0
	for i, s := range samples {
		worst = max(worst, s.ready)
		capacity = max(capacity, acks.rate(s.at, 2*time.Second))
		if i == 0 || s.sent <= samples[i-1].sent || s.pace < 0 {
			continue
		}
		if c := acks.rate(s.at, 2*time.Second); c > 0 {
			ratios = append(ratios, s.pace/c)
		}
	}
	if len(ratios) < 10 {
		t.Fatalf("only %d samples with a measured pace while the replay sent", len(ratios))
	}
	sort.Float64s(ratios)
	median := ratios[len(ratios)/2]
	bound := 3*capacity + 5
	t.Logf("%d messages in %s; %d samples while sending: stated pace / consumer's acks: median %.2f, from %.2f to %.2f; the consumer's fastest 2 s: %.0f msg/s; largest ready %d (bound %.0f)",
		900, took.Round(100*time.Millisecond), len(ratios), median, ratios[0], ratios[len(ratios)-1], capacity, worst, bound)
	// At most twice the acks plus the minimum backlog's 5 a second, with a
	// tenth for the two windows' misalignment.
	if limit := 1.1 * (2 + 5/capacity); median < 0.5 || median > limit {
		t.Errorf("the stated pace is a median %.2f× what the consumer acknowledged: want from 0.5 to %.2f", median, limit)
	}
	if float64(worst) > bound {
		t.Errorf("the target held %d ready, above three seconds of the consumer's acks plus 5 (%.0f)", worst, bound)
	}
}
