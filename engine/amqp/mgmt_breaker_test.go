package amqp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// fakeNow is a clock a test moves by hand.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeNow) set(t time.Time) {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
}

func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// TestNodeBreaker: closed it lets requests through; a failure opens it for
// the cool-down, during which every request is refused with
// ErrManagementDown and no probe; past it, one request (only one) is told
// to probe, the others are still refused; a failed probe opens it for
// another cool-down, an answered one closes it.
func TestNodeBreaker(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeNow{t: start}
	nb := &nodeBreaker{now: clock.now, cooldown: 30 * time.Second}
	const base = "http://127.0.0.1:15672"
	if probe, err := nb.allow(base); err != nil || probe {
		t.Fatalf("closed breaker: probe %v, err %v; want a request let through", probe, err)
	}
	cause := unavailable("management API "+base, errors.New("GET /api/overview: no answer within 5s"))
	nb.failed(cause)
	for _, after := range []time.Duration{0, time.Second, 29 * time.Second} {
		clock.set(start.Add(after))
		probe, err := nb.allow(base)
		if err == nil || probe {
			t.Fatalf("%s into the cool-down: probe %v, err %v; want refused, no probe", after, probe, err)
		}
		if !errors.Is(err, engine.ErrManagementDown) || !errors.Is(err, engine.ErrBrokerUnavailable) {
			t.Fatalf("refusal %v is not ErrManagementDown and ErrBrokerUnavailable", err)
		}
		if !strings.Contains(err.Error(), "no answer within 5s") || !strings.Contains(err.Error(), "next probe at 12:00:30") {
			t.Fatalf("refusal %q does not say why and when the API is asked again", err)
		}
	}
	clock.add(time.Second) // 30 s: the cool-down is over
	probe, err := nb.allow(base)
	if err == nil || !probe {
		t.Fatalf("past the cool-down: probe %v, err %v; want refused with a probe to start", probe, err)
	}
	if probe, err := nb.allow(base); err == nil || probe {
		t.Fatalf("while the probe runs: probe %v, err %v; want refused, no second probe", probe, err)
	}
	nb.failed(cause) // the probe got no answer: another cool-down from now
	clock.add(29 * time.Second)
	if probe, err := nb.allow(base); err == nil || probe {
		t.Fatalf("29 s after a failed probe: probe %v, err %v; want refused, no probe", probe, err)
	}
	clock.add(time.Second)
	if probe, err := nb.allow(base); err == nil || !probe {
		t.Fatalf("a cool-down after the failed probe: probe %v, err %v; want a probe", probe, err)
	}
	nb.answered()
	if probe, err := nb.allow(base); err != nil || probe {
		t.Fatalf("after an answered probe: probe %v, err %v; want a request let through", probe, err)
	}
}

// TestHangingManagementAPIIsWaitedOnOnce: a management API that accepts
// connections and never answers costs the first request its deadline
// (HTTPTimeout) and no more; the next requests fail at once with
// ErrManagementDown. Past the cool-down a request still fails at once
// and starts a probe in the background; once the API answers the probe,
// requests go to it again.
func TestHangingManagementAPIIsWaitedOnOnce(t *testing.T) {
	t.Parallel()
	var answering atomic.Bool
	var hits atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !answering.Load() {
			select { // a plugin that stopped answering
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = w.Write([]byte(`{"rabbitmq_version":"3.10.8","name":"q","type":"classic","messages_ready":3}`))
	}))
	defer srv.Close()
	defer close(release)
	mgmtURL := "http://guest:guest@" + srv.Listener.Addr().String()
	const timeout = 500 * time.Millisecond
	b, err := New(Config{ManagementURL: mgmtURL, HTTPTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeNow{t: time.Now()}
	b.mgmt.brk[0].now = clock.now
	ctx := context.Background()

	began := time.Now()
	_, err = b.QueueStats(ctx, "q")
	took := time.Since(began)
	if !errors.Is(err, engine.ErrManagementDown) || !errors.Is(err, engine.ErrBrokerUnavailable) {
		t.Fatalf("first request to a hanging API: %v; want ErrManagementDown", err)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Fatalf("the first request took %s, want its deadline %s", took, timeout)
	}
	asked := hits.Load()
	for i := range 20 {
		began = time.Now()
		_, err = b.QueueStats(ctx, "q")
		if took := time.Since(began); !errors.Is(err, engine.ErrManagementDown) || took > 50*time.Millisecond {
			t.Fatalf("request %d while the breaker is open: %v after %s; want ErrManagementDown at once", i+2, err, took)
		}
	}
	if hits.Load() != asked {
		t.Fatalf("the API was asked %d more time(s) while the breaker was open", hits.Load()-asked)
	}

	answering.Store(true)
	clock.add(DefaultManagementCooldown)
	began = time.Now()
	if _, err := b.QueueStats(ctx, "q"); !errors.Is(err, engine.ErrManagementDown) || time.Since(began) > 50*time.Millisecond {
		t.Fatalf("the request that starts the probe: %v after %s; want ErrManagementDown at once", err, time.Since(began))
	}
	testkit.Eventually(t, 10*time.Second, "the probe to close the breaker", func() bool { return !b.mgmt.brk[0].down() })
	s, err := b.QueueStats(ctx, "q")
	if err != nil || !s.Sampled || s.Ready != 3 {
		t.Fatalf("after the probe was answered: %+v, %v; want the queue's answer", s, err)
	}
}
