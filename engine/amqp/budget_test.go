package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestEffectiveLimitArithmetic follows rabbit_quorum_queue's rules on
// answers shaped like the management API's.
func TestEffectiveLimitArithmetic(t *testing.T) {
	cases := []struct {
		name, version, json string
		want                limitInfo
	}{
		{"classic with a policy", "4.0.5", `{"type":"classic","effective_policy_definition":{"delivery-limit":5}}`, limitInfo{}},
		{"3.x none", "3.10.8", `{"type":"quorum"}`, limitInfo{}},
		{"4.0 default", "4.0.5", `{"type":"quorum"}`, limitInfo{true, 20, "default"}},
		{"unknown version: 4's default", "", `{"type":"quorum"}`, limitInfo{true, 20, "default"}},
		{"argument", "3.10.8", `{"type":"quorum","arguments":{"x-delivery-limit":3}}`, limitInfo{true, 3, "argument"}},
		{"policy", "4.0.5", `{"type":"quorum","effective_policy_definition":{"delivery-limit":7}}`, limitInfo{true, 7, "policy"}},
		{"3.x empty policy is []", "3.10.8", `{"type":"quorum","effective_policy_definition":[]}`, limitInfo{}},
		{"the smaller wins: argument", "4.0.5", `{"type":"quorum","arguments":{"x-delivery-limit":3},"effective_policy_definition":{"delivery-limit":9}}`, limitInfo{true, 3, "argument"}},
		{"the smaller wins: policy", "3.10.8", `{"type":"quorum","arguments":{"x-delivery-limit":30},"effective_policy_definition":{"delivery-limit":9}}`, limitInfo{true, 9, "policy"}},
		{"4.0 negative is unlimited", "4.0.5", `{"type":"quorum","arguments":{"x-delivery-limit":-1}}`, limitInfo{}},
		{"4.0 negative loses to a limit", "4.0.5", `{"type":"quorum","arguments":{"x-delivery-limit":-1},"effective_policy_definition":{"delivery-limit":9}}`, limitInfo{true, 9, "policy"}},
		{"3.x negative drops at once", "3.10.8", `{"type":"quorum","arguments":{"x-delivery-limit":-1}}`, limitInfo{true, 0, "argument"}},
		{"reported limit lags a raise", "4.0.5", `{"type":"quorum","effective_policy_definition":{"delivery-limit":100},"delivery_limit":6}`, limitInfo{true, 6, "policy"}},
		{"reported unlimited", "4.0.5", `{"type":"quorum","arguments":{"x-delivery-limit":-1},"delivery_limit":"unlimited"}`, limitInfo{}},
	}
	for _, tc := range cases {
		var q queueJSON
		if err := json.Unmarshal([]byte(tc.json), &q); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := q.limit(tc.version); got != tc.want {
			t.Errorf("%s: limit = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for v, counts := range map[string]bool{"3.10.8": true, "4.0.5": true, "4.2.9": true, "4.3.0": false, "4.3.5": false, "5.0.0": false, "": true} {
		if requeueCounts(v) != counts {
			t.Errorf("returnsCount(%q) = %v, want %v", v, !counts, counts)
		}
	}
}

// TestInspectReadBudget reads the effective limit from real brokers: none
// on a 3.10 quorum queue without one, 4.0's default of 20, a policy (and
// the policy to raise it in), and nothing for a classic queue.
func TestInspectReadBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		b := testBroker(t, onBroker(on, Config{}))
		bare := e.queue("t-budget-bare", amqp.Table{"x-queue-type": "quorum"})
		st, err := b.Inspect(ctx, bare)
		if err != nil {
			t.Fatal(err)
		}
		if on.Name == "rabbit4" {
			if st.DeliveryLimit != 20 || !st.RequeueCounts || st.LimitFrom != "default" || st.BrokerVersion == "" || st.ReadsLeft() != 19 {
				t.Fatalf("quorum queue without a limit on 4.0: %+v, want the default 20, 19 reads left", st)
			}
		} else if st.DeliveryLimit != 0 || st.RequeueCounts || st.ReadsLeft() != -1 {
			t.Fatalf("quorum queue without a limit on 3.10: %+v, want no limit", st)
		}

		pol := e.queue("t-budget-pol", amqp.Table{"x-queue-type": "quorum"})
		classic := e.queue("t-budget-pol-classic", nil)
		name := testkit.Name("pol")
		on.SetPolicy(t, name, "^"+pol+"$|^"+classic+"$", map[string]any{"delivery-limit": 9, "max-length": 100000})
		testkit.Eventually(t, 20*time.Second, "the policy applied", func() bool {
			st, err = b.Inspect(ctx, pol)
			return err == nil && st.DeliveryLimit == 9
		})
		if !st.RequeueCounts || st.LimitFrom != "policy" || st.Policy == nil || st.Policy.Name != name || st.Policy.Priority != 10 || st.Policy.Definition["max-length"] == nil {
			t.Fatalf("quorum queue with a policy: %+v", st)
		}
		if cst, err := b.Inspect(ctx, classic); err != nil || cst.DeliveryLimit != 0 || cst.RequeueCounts {
			t.Fatalf("classic queue with a delivery-limit policy: %+v, %v; want no limit", cst, err)
		}

		op := e.queue("t-budget-op", amqp.Table{"x-queue-type": "quorum"})
		opName := testkit.Name("op")
		on.SetOperatorPolicy(t, opName, "^"+op+"$", map[string]any{"delivery-limit": 4})
		testkit.Eventually(t, 20*time.Second, "the operator policy applied", func() bool {
			st, err = b.Inspect(ctx, op)
			return err == nil && st.DeliveryLimit == 4
		})
		if !st.RequeueCounts || st.LimitFrom != "operator policy" || st.OperatorPolicy != opName || st.Policy != nil {
			t.Fatalf("quorum queue with an operator policy: %+v", st)
		}
		if raise := engine.RaiseLimit("/", st, 30); !strings.Contains(raise, "operator policy "+opName) {
			t.Fatalf("raising the limit does not name the operator policy: %s", raise)
		}
	})
}

// countingMarks is a ReadMarks shared by two Brokers, as Redis is by replicas.
type countingMarks struct {
	mu sync.Mutex
	m  map[string]engine.ReadMark
}

func (c *countingMarks) LastRead(_ context.Context, vhost, queue string) (engine.ReadMark, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.m[vhost+queue]
	return m, ok, nil
}

func (c *countingMarks) RecordRead(_ context.Context, vhost, queue string, m engine.ReadMark, whole bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]engine.ReadMark{}
	}
	if old, ok := c.m[vhost+queue]; ok && !whole && old.Count > m.Count {
		m.Count = old.Count
	}
	c.m[vhost+queue] = m
	return nil
}

// TestScanStopsBeforeTheLimit scans a quorum queue with a delivery limit of
// 3 over and over, alternating two Brokers that share their read marks (two
// replicas): two scans are allowed (one give-back is kept in reserve), the
// rest are refused with ErrReadBudget, and no message is ever dropped.
// Without the budget the fourth scan drops every message.
func TestScanStopsBeforeTheLimit(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-budget-scan", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)})
		e.publish(q, testMessages(10))
		shared := &countingMarks{}
		var replicas [2]*Broker
		for i := range replicas {
			replicas[i] = testBroker(t, onBroker(on, Config{ReadMarks: shared}))
		}
		ok, refused := 0, 0
		for i := range 5 {
			_, err := replicas[i%2].Scan(context.Background(), q, func(engine.Message) error { return nil })
			var rbe *engine.ReadBudgetError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &rbe) && errors.Is(err, engine.ErrReadBudget):
				refused++
				if rbe.Limit != 3 || rbe.Left != 0 || rbe.Midway {
					t.Fatalf("refusal %+v", *rbe)
				}
			default:
				t.Fatalf("scan %d: %v", i+1, err)
			}
			e.waitReady(q, 10)
		}
		if ok != 2 || refused != 3 {
			t.Fatalf("%d scans read, %d refused; want 2 and 3", ok, refused)
		}
		if got := len(e.readAll(q)); got != 10 {
			t.Fatalf("queue holds %d, want 10", got)
		}
	})
}

// TestReadStopsAtAHighCount: another client gave the messages back twice
// (count 2 of a limit of 3), which no mark knows: the read stops at the
// first delivery whose give-back would bring it to its limit, gives back
// what it holds, and nothing is dropped.
func TestReadStopsAtAHighCount(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-budget-mid", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(3)})
		e.publish(q, testMessages(10))
		for range 2 {
			e.giveBackAll(q, 10)
		}
		b := testBroker(t, onBroker(on, Config{Prefetch: 2}))
		visited := 0
		_, err := b.Scan(context.Background(), q, func(engine.Message) error { visited++; return nil })
		var rbe *engine.ReadBudgetError
		if !errors.As(err, &rbe) || !rbe.Midway || rbe.Count != 2 || rbe.Limit != 3 {
			t.Fatalf("Scan = %v, want stopped midway by the read budget at count 2", err)
		}
		if visited != 0 {
			t.Fatalf("visited %d messages past the budget", visited)
		}
		e.waitReady(q, 10)
		// The mark now says count 3: the next read is refused before reading.
		if _, err := b.Scan(context.Background(), q, func(engine.Message) error { return nil }); !errors.As(err, &rbe) || rbe.Midway {
			t.Fatalf("second Scan = %v, want refused before reading", err)
		}
		if got := len(e.readAll(q)); got != 10 {
			t.Fatalf("queue holds %d, want 10", got)
		}
	})
}

// giveBackAll consumes all n messages of q and gives them back with
// Nack(multiple, requeue), as any reader would.
func (e *testEnv) giveBackAll(q string, n int) {
	e.t.Helper()
	ch := e.channel()
	defer ch.Close()
	if err := ch.Qos(n, 0, false); err != nil {
		e.t.Fatal(err)
	}
	ds, err := ch.Consume(q, "giveback", false, false, false, false, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for range n {
		<-ds
	}
	if err := ch.Cancel("giveback", false); err != nil {
		e.t.Fatal(err)
	}
	if err := ch.Nack(0, true, true); err != nil {
		e.t.Fatal(err)
	}
	e.waitReady(q, n)
}
