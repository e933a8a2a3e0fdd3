package amqp

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("consumer", func(t *testing.T) {
		t.Parallel()
		q := newEnv(t).twoReadyOneHeld("t-inspect")
		b := testBroker(t, Config{})
		st, err := b.Inspect(ctx, q)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		want := engine.QueueInfo{Name: q, Exists: true, Ready: 2, Consumers: 1, Type: "classic"}
		if st != want {
			t.Fatalf("Inspect = %+v, want %+v", st, want)
		}
	})

	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		q := e.queue("t-inspect", nil)
		b := testBroker(t, Config{})
		if _, err := b.Inspect(ctx, q); err != nil {
			t.Fatal(err)
		}
		conn := b.conns.conn
		st, err := b.Inspect(ctx, q+"-missing")
		if err != nil || st != (engine.QueueInfo{Name: q + "-missing"}) {
			t.Fatalf("Inspect of a missing queue = %+v, %v", st, err)
		}
		// The 404 closed only the probe channel.
		if st, err := b.Inspect(ctx, q); err != nil || !st.Exists {
			t.Fatalf("Inspect after a missing queue = %+v, %v", st, err)
		}
		if b.conns.conn != conn || conn.IsClosed() {
			t.Fatal("the connection was replaced after a missing queue")
		}
	})

	t.Run("quorum-delivery-limit", func(t *testing.T) {
		t.Parallel()
		testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
			e := newEnvOn(t, on)
			q := e.queue("t-inspect", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5)})
			b := testBroker(t, onBroker(on, Config{}))
			st, err := b.Inspect(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Exists || st.Type != "quorum" || st.DeliveryLimit != 5 || st.RequeueCounts != on.RequeueCounts() || st.LimitFrom != "argument" {
				t.Fatalf("Inspect = %+v, want an existing quorum queue with delivery limit 5 from its argument (give-backs counting: %v)", st, on.RequeueCounts())
			}
		})
	})

	// Look is the passive declare alone: the same ready and consumer
	// counts, a missing queue, and an answer while the management API
	// hangs (Inspect would wait for it up to HTTPTimeout).
	t.Run("look", func(t *testing.T) {
		t.Parallel()
		q := newEnv(t).twoReadyOneHeld("t-look")
		proxy, mgmt := testkit.HangProxyFor(t, testkit.Rabbit3.ManagementURL)
		proxy.Hang()
		b := testBroker(t, Config{ManagementURL: mgmt, HTTPTimeout: time.Minute})
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := b.Look(lctx, q)
		if want := (engine.QueueInfo{Name: q, Exists: true, Ready: 2, Consumers: 1}); err != nil || st != want {
			t.Fatalf("Look while the management API hangs = %+v, %v; want %+v", st, err, want)
		}
		if st, err := b.Look(lctx, q+"-missing"); err != nil || st != (engine.QueueInfo{Name: q + "-missing"}) {
			t.Fatalf("Look at a missing queue = %+v, %v", st, err)
		}
		if n := proxy.Accepted.Load(); n != 0 {
			t.Fatalf("Look asked the management API (%d connection(s))", n)
		}
	})

	t.Run("no-management", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		q := e.queue("t-inspect", nil)
		b := testBroker(t, Config{ManagementURL: "http://guest:guest@127.0.0.1:1"})
		st, err := b.Inspect(ctx, q)
		if err != nil || !st.Exists || st.Type != "" {
			t.Fatalf("Inspect without management = %+v, %v; want Exists and no type", st, err)
		}
	})
}

// twoReadyOneHeld declares a queue named from prefix holding three
// messages, one of them held by a consumer (prefetch 1): two ready, one
// consumer.
func (e *testEnv) twoReadyOneHeld(prefix string) string {
	e.t.Helper()
	q := e.queue(prefix, nil)
	e.publish(q, testMessages(3))
	ch := e.channel()
	if err := ch.Qos(1, 0, false); err != nil {
		e.t.Fatal(err)
	}
	d, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	<-d // one message now held: 2 ready
	return q
}

// TestReconnect: a lost connection is re-dialled by the next operation.
func TestReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-reconnect", nil)
	b := testBroker(t, Config{})
	ctx := context.Background()
	if _, err := b.Inspect(ctx, q); err != nil {
		t.Fatal(err)
	}
	old := b.conns.conn
	old.Close()
	st, err := b.Inspect(ctx, q)
	if err != nil || !st.Exists {
		t.Fatalf("Inspect after losing the connection = %+v, %v", st, err)
	}
	if b.conns.conn == old {
		t.Fatal("connection not re-dialled")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect(ctx, q); !errors.Is(err, ErrBrokerClosed) {
		t.Fatalf("Inspect after Close: %v, want ErrBrokerClosed", err)
	}
}

// TestUnavailable: a broker nobody listens for fails fast with
// ErrBrokerUnavailable.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	b := testBroker(t, Config{URL: "amqp://guest:secret@127.0.0.1:1/", ManagementURL: "http://guest:secret@127.0.0.1:1"})
	ctx := context.Background()
	start := time.Now()
	errs := map[string]error{}
	_, errs["Inspect"] = b.Inspect(ctx, "q")
	_, errs["Scan"] = b.Scan(ctx, "q", func(engine.Message) error { return nil })
	_, errs["Route"] = b.Route(ctx, "x", "k")
	_, errs["QueueStats"] = b.QueueStats(ctx, "q")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failing took %v", d)
	}
	for op, err := range errs {
		if !errors.Is(err, engine.ErrBrokerUnavailable) {
			t.Errorf("%s: %v, want ErrBrokerUnavailable", op, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error leaks the password: %v", op, err)
		}
	}
	t.Logf("Inspect: %v", errs["Inspect"])
}

// TestQueueStats polls the management API until the published messages
// show (the statistics lag by one interval or two).
func TestQueueStats(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-stats", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(7)})
		// The publish counter comes from the publishing channel's own
		// statistics, which a channel that closes at once may never send:
		// publish on one that stays open until the counters show.
		ch, err := e.conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		for _, m := range testMessages(10) {
			if err := ch.PublishWithContext(context.Background(), "", q, false, false, m); err != nil {
				t.Fatal(err)
			}
		}
		b := testBroker(t, onBroker(on, Config{}))
		ctx := context.Background()
		var s QueueStats
		deadline := time.Now().Add(30 * time.Second)
		for tick := time.NewTicker(100 * time.Millisecond); ; <-tick.C {
			var err error
			if s, err = b.QueueStats(ctx, q); err != nil {
				t.Fatalf("QueueStats: %v", err)
			}
			if s.Sampled && s.Ready == 10 && s.Publish >= 10 {
				tick.Stop()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("statistics did not show 10 published messages within 30s: last %+v", s)
			}
		}
		if s.Type != "quorum" || s.DeliveryLimit != 7 || s.Unacked != 0 || s.Consumers != 0 || s.SampledAt.IsZero() {
			t.Fatalf("QueueStats = %+v", s)
		}
		if _, err := b.QueueStats(ctx, q+"-missing"); !errors.Is(err, engine.ErrQueueNotFound) {
			t.Fatalf("QueueStats of a missing queue: %v", err)
		}
	})
}

func TestNew(t *testing.T) {
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Vhost() != "/" || b.cfg.Prefetch != DefaultPrefetch || b.cfg.IdleTimeout != DefaultIdleTimeout {
		t.Fatalf("defaults not applied: vhost %q, %+v", b.Vhost(), b.cfg)
	}
	b, err = New(Config{URL: "amqp://u:p@example.com:5672/my%2Fvhost"})
	if err != nil || b.Vhost() != "my/vhost" {
		t.Fatalf("vhost = %q, %v", b.Vhost(), err)
	}
	for _, cfg := range []Config{
		{URL: "http://127.0.0.1:5672/"},
		{URL: "amqp://a b"},
		{ManagementURL: "amqp://127.0.0.1:15672"},
		{ManagementURL: "://nope"},
		{Prefetch: MaxPrefetch + 1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted a bad config", cfg)
		}
	}
}
