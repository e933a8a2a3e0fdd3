package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
}

// TestBudgetRulePerVersion: what a give-back with nack(requeue) costs on
// each version, and a quorum queue on a broker whose version cannot be
// read refused before any read (fail closed); a classic queue needs no
// version. The AMQP side is unreachable here, so the management API's
// version is the only one.
func TestBudgetRulePerVersion(t *testing.T) {
	t.Parallel()
	b, err := New(Config{URL: "amqp://guest:guest@127.0.0.1:1/", ManagementURL: "http://guest:guest@127.0.0.1:1", DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	for _, tc := range []struct {
		version string
		counts  bool // nack(requeue) counts against the limit
		limit   int  // effective limit of a quorum queue that sets none
	}{
		{"3.10.8", true, 0},
		{"3.13.7", true, 0},
		{"4.0.5", true, 20},
		{"4.1.4", true, 20},
		{"4.2.1", true, 20},
		{"4.3.0", false, 20},
		{"4.3.6", false, 20},
		{"4.4.0-beta.1", false, 20},
		{"5.0.0", false, 20},
	} {
		bare := &queueJSON{Name: "q", Type: "quorum", version: tc.version}
		limit, rc, err := b.readCounts(ctx, bare)
		if err != nil || limit != tc.limit {
			t.Errorf("%s: readCounts(bare quorum) = %d, %+v, %v; want limit %d", tc.version, limit, rc, err, tc.limit)
		}
		withArg := &queueJSON{Name: "q", Type: "quorum", Arguments: map[string]any{"x-delivery-limit": float64(2)}, version: tc.version}
		limit, rc, err = b.readCounts(ctx, withArg)
		if err != nil || limit != 2 || rc.RequeueCounts != tc.counts || rc.BrokerVersion != tc.version {
			t.Errorf("%s: readCounts(x-delivery-limit=2) = %d, %+v, %v; want limit 2, requeue counts %v", tc.version, limit, rc, err, tc.counts)
		}
		q := engine.QueueInfo{Name: "q", DeliveryLimit: limit, ReadCounts: rc}
		if left := q.ReadsLeft(); tc.counts && left != 1 || !tc.counts && left != -1 {
			t.Errorf("%s: reads left %d, want %d", tc.version, left, map[bool]int{true: 1, false: -1}[tc.counts])
		}
		if requeueCounts(tc.version) != tc.counts {
			t.Errorf("requeueCounts(%q) = %v, want %v", tc.version, !tc.counts, tc.counts)
		}
	}
	for _, tc := range [][3]string{ // management API's, AMQP server's, chosen
		{"4.3.6", "4.3.6", "4.3.6"},
		{"4.3.6", "4.2.1", "4.2.1"}, // a cluster mid-upgrade: the older rules
		{"4.0.5", "4.3.6", "4.0.5"},
		{"", "4.3.6", "4.3.6"},
		{"odd", "4.0.5", "4.0.5"},
		{"4.3.6", "", "4.3.6"},
		{"odd", "", "odd"},
		{"", "", ""},
	} {
		if got := pickVersion(tc[0], tc[1]); got != tc[2] {
			t.Errorf("pickVersion(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
	for _, odd := range []string{"", "4", "four.three", "v4.3.6", "4.x", "rabbit"} {
		q := &queueJSON{Name: "orders.dlq", Type: "quorum", Arguments: map[string]any{"x-delivery-limit": float64(2)}, version: odd}
		_, _, err := b.readCounts(ctx, q)
		var bue *engine.BudgetUnknownError
		if !errors.As(err, &bue) || !errors.Is(err, engine.ErrBudgetUnknown) || bue.Queue != "orders.dlq" ||
			!strings.Contains(err.Error(), "cannot tell the delivery limit of orders.dlq") || !strings.Contains(err.Error(), "version") {
			t.Errorf("version %q: readCounts = %v, want a BudgetUnknownError naming the version", odd, err)
		}
		if c := (&queueJSON{Name: "c", Type: "classic", version: odd}); true {
			if limit, rc, err := b.readCounts(ctx, c); err != nil || limit != 0 || rc.RequeueCounts {
				t.Errorf("version %q: classic queue = %d, %+v, %v; want no budget and no error", odd, limit, rc, err)
			}
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
		switch {
		case !strings.HasPrefix(st.BrokerVersion, on.Series+".") && on.DefaultDeliveryLimit() > 0:
			t.Fatalf("broker version %q, want %s.x (read from the broker)", st.BrokerVersion, on.Series)
		case on.DefaultDeliveryLimit() == 0:
			if st.DeliveryLimit != 0 || st.RequeueCounts || st.ReadsLeft() != -1 {
				t.Fatalf("quorum queue without a limit on %s: %+v, want no limit", on.Series, st)
			}
		case on.RequeueCounts():
			if st.DeliveryLimit != 20 || !st.RequeueCounts || st.LimitFrom != "default" || st.ReadsLeft() != 19 {
				t.Fatalf("quorum queue without a limit on %s: %+v, want the default 20, 19 reads left", on.Series, st)
			}
		default: // 4.3: the default limit, but reads do not count against it
			if st.DeliveryLimit != 20 || st.RequeueCounts || st.LimitFrom != "default" || st.ReadsLeft() != -1 {
				t.Fatalf("quorum queue without a limit on %s: %+v, want the default 20 and no read budget", on.Series, st)
			}
		}

		pol := e.queue("t-budget-pol", amqp.Table{"x-queue-type": "quorum"})
		classic := e.queue("t-budget-pol-classic", nil)
		name := testkit.Name("pol")
		on.SetPolicy(t, name, "^"+pol+"$|^"+classic+"$", map[string]any{"delivery-limit": 9, "max-length": 100000})
		testkit.Eventually(t, 20*time.Second, "the policy applied", func() bool {
			st, err = b.Inspect(ctx, pol)
			return err == nil && st.DeliveryLimit == 9
		})
		if st.RequeueCounts != on.RequeueCounts() || st.LimitFrom != "policy" || st.Policy == nil || st.Policy.Name != name || st.Policy.Priority != 10 || st.Policy.Definition["max-length"] == nil {
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
		if st.RequeueCounts != on.RequeueCounts() || st.LimitFrom != "operator policy" || st.OperatorPolicy != opName || st.Policy != nil {
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
// replicas): before 4.3 two scans are allowed (one give-back is kept in
// reserve), the rest are refused with ErrReadBudget; on 4.3, which does not
// count a nack(requeue), all five read. No message is ever dropped.
// Without the budget the fourth scan drops every message before 4.3.
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
		wantOK, wantRefused := 2, 3
		if !on.RequeueCounts() {
			wantOK, wantRefused = 5, 0 // 4.3: a give-back costs nothing
		}
		if ok != wantOK || refused != wantRefused {
			t.Fatalf("%d scans read, %d refused; want %d and %d on %s", ok, refused, wantOK, wantRefused, on.Series)
		}
		if got := len(e.readAll(q)); got != 10 {
			t.Fatalf("queue holds %d, want 10", got)
		}
	})
}

// TestReadStopsAtAHighCount: another client gave the messages back twice
// (count 2 of a limit of 3 before 4.3; still 0 on 4.3, which reads them
// all), which no mark knows: the read stops at the
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
		if !on.RequeueCounts() {
			// 4.3: the two give-backs left the count at 0; reads go on.
			if err != nil || visited != 10 {
				t.Fatalf("Scan on %s = %v after visiting %d, want all 10 read", on.Series, err, visited)
			}
			if got := len(e.readAll(q)); got != 10 {
				t.Fatalf("queue holds %d, want 10", got)
			}
			return
		}
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

// TestBudgetFailsClosed reads through a management API that goes away: a
// quorum queue is then refused before anything is read, with a
// BudgetUnknownError naming the queue and the cause, and its messages are
// still in it never delivered (the broker marks none redelivered); a
// classic queue an earlier answer described reads on; a classic queue this
// Broker never saw described is refused as well, for it might be a quorum
// queue.
func TestBudgetFailsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-budget-closed", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5)})
		c := e.queue("t-budget-closed-classic", nil)
		unseen := e.queue("t-budget-closed-unseen", nil)
		for _, name := range []string{q, c, unseen} {
			e.publish(name, testMessages(3))
		}
		target, err := url.Parse(on.ManagementURL)
		if err != nil {
			t.Fatal(err)
		}
		target.User = nil
		proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		t.Cleanup(proxy.Close)
		cfg := onBroker(on, Config{})
		cfg.ManagementURL = "http://guest:guest@" + proxy.Listener.Addr().String()
		b := testBroker(t, cfg)
		for _, name := range []string{q, c} {
			if st, err := b.Inspect(ctx, name); err != nil || st.Type == "" {
				t.Fatalf("Inspect %s through the proxy = %+v, %v", name, st, err)
			}
		}
		proxy.Close()
		b.info.mu.Lock() // the answers are past infoTTL now
		for k, v := range b.info.m {
			v.at = time.Time{}
			b.info.m[k] = v
		}
		b.info.mu.Unlock()

		for _, name := range []string{q, unseen} {
			visited := 0
			_, err := b.Scan(ctx, name, func(engine.Message) error { visited++; return nil })
			var bue *engine.BudgetUnknownError
			if !errors.As(err, &bue) || !errors.Is(err, engine.ErrBudgetUnknown) || bue.Queue != name ||
				!strings.Contains(err.Error(), "cannot tell the delivery limit of "+name+": management API unreachable") {
				t.Fatalf("Scan %s without the management API = %v, want refused: cannot tell the delivery limit", name, err)
			}
			if visited != 0 {
				t.Fatalf("Scan %s visited %d messages", name, visited)
			}
		}
		visited := 0
		if _, err := b.Scan(ctx, c, func(engine.Message) error { visited++; return nil }); err != nil || visited != 3 {
			t.Fatalf("Scan of the known classic queue without the management API = %v after %d, want all 3 read", err, visited)
		}
		for _, name := range []string{q, unseen} {
			got := e.readAll(name)
			if len(got) != 3 {
				t.Fatalf("%s holds %d, want 3", name, len(got))
			}
			for _, d := range got {
				if d.Redelivered {
					t.Fatalf("%s: a message was delivered before (redelivered): the refused read read it", name)
				}
			}
		}
	})
}

// TestBudgetVersionFromAMQP: a management API that does not tell the
// version (its /api/overview answers without rabbitmq_version) leaves the
// version the AMQP server announced, and the budget follows that
// version's rule on each broker.
func TestBudgetVersionFromAMQP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, on)
		q := e.queue("t-budget-amqpver", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(5)})
		target, err := url.Parse(on.ManagementURL)
		if err != nil {
			t.Fatal(err)
		}
		target.User = nil
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/api/overview" {
				_, _ = w.Write([]byte(`{"management_version":"","rabbitmq_version":""}`))
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		cfg := onBroker(on, Config{})
		cfg.ManagementURL = "http://guest:guest@" + srv.Listener.Addr().String()
		b := testBroker(t, cfg)
		st, err := b.Inspect(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(st.BrokerVersion, on.Series+".") || st.DeliveryLimit != 5 || st.RequeueCounts != on.RequeueCounts() {
			t.Fatalf("Inspect without the API's version on %s = %+v; want version %s.x from AMQP, limit 5, give-backs counting %v",
				on.Name, st, on.Series, on.RequeueCounts())
		}
	})
}
