package amqp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestArrivals: what reached a fresh queue within the hour — messages
// published into it and dead letters, which the broker does not count as
// publishes — is its arrivals, never more, on every broker; the samples
// cover the hour; a missing queue is ErrQueueNotFound.
func TestArrivals(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		r := on.Dial(t)
		src, dlq := testkit.Name("arrivals-src"), testkit.Name("arrivals-dlq")
		r.Topology(src, dlq, nil)
		r.Publish(dlq, testkit.Msgs(5, 10)...)
		r.Reject(src, testkit.Msgs(4, 10)...)
		b := testBroker(t, onBroker(on, Config{}))
		ctx := context.Background()
		said := ""
		testkit.Eventually(t, 2*time.Minute, "9 arrivals", func() bool {
			n, since, err := b.Arrivals(ctx, dlq, time.Hour)
			if err != nil {
				if err.Error() != said { // no samples yet
					t.Logf("arrivals: %v", err)
					said = err.Error()
				}
				return false
			}
			if n > 9 {
				t.Fatalf("%d arrivals, more than the 5 published and 4 dead-lettered", n)
			}
			if !since.IsZero() {
				t.Errorf("the samples begin at %s, within the hour", since)
			}
			return n == 9
		})
		if _, _, err := b.Arrivals(ctx, testkit.Name("none"), time.Hour); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Errorf("a missing queue: %v", err)
		}
	})
}

// TestArrivalsRise: arrivals are the larger of the publishes' and the
// length's growth, each summed from sample to sample; a fall (messages
// leaving, a counter reset) counts as none.
func TestArrivalsRise(t *testing.T) {
	t.Parallel()
	s := func(vs ...int64) []sampleJSON {
		out := make([]sampleJSON, len(vs))
		for i, v := range vs {
			out[len(vs)-1-i] = sampleJSON{Sample: v, Timestamp: int64(i) * 60_000} // newest first, as the API lists them
		}
		return out
	}
	for _, c := range []struct {
		name               string
		published, lengths []sampleJSON
		want               int64
	}{
		{"dead letters only", nil, s(0, 4, 4, 10), 10},
		{"publishes only", s(0, 3, 7), s(0, 3, 7), 7},
		{"published and drained", s(0, 5, 5), s(0, 0, 0), 5},
		{"dead-lettered, drained, then more", nil, s(0, 6, 0, 2), 8},
		{"publish counter reset", s(5, 8, 0, 2), nil, 5},
		{"published and dead-lettered, sampled apart", s(0, 5, 5), s(0, 0, 9), 9},
		{"nothing", nil, nil, 0},
	} {
		if got := max(rise(c.published), rise(c.lengths)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
