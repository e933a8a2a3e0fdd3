package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// listedQueues is a broker's queue list.
type listedQueues []engine.QueueListing

func (q listedQueues) ListQueues(context.Context) ([]engine.QueueListing, error) { return q, nil }

// counter counts arrivals from a table, remembering which queues it was
// asked for; a queue it has no count for cannot be told.
type counter struct {
	mu     sync.Mutex
	n      map[string]int
	since  map[string]time.Time
	queues []string
}

func (c *counter) Arrivals(_ context.Context, q string, span time.Duration) (int, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues = append(c.queues, q)
	if span != time.Hour {
		return 0, time.Time{}, errors.New("not an hour")
	}
	n, ok := c.n[q]
	if !ok {
		return 0, time.Time{}, errors.New("management API: no answer")
	}
	return n, c.since[q], nil
}

// TestListShowsArrivalsAndTopGroup: a list asks the broker once for the
// arrivals of each DLQ the caller may read and never for the others; a
// DLQ whose arrivals it cannot tell is listed, as unknown (null); the top
// group is the one the DLQ's latest whole preview saw, by id and type,
// never with its text; a DLQ never previewed has none.
func TestListShowsArrivalsAndTopGroup(t *testing.T) {
	t.Parallel()
	p, err := commands.ParsePolicy([]byte(`roles:
  - name: orders
    users: [U0ALICE001]
    grants:
      - queues: ["orders.*"]
        actions: [read]
`))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	since := now.Add(-20 * time.Minute)
	const text = "card 4111 declined for John Roe"
	row := func(key, typ string, n int) engine.ArrivalRow {
		return engine.ArrivalRow{Key: key, GroupID: engine.GroupID(key), Type: typ, Messages: n, Last: now, Counts: []int{n}}
	}
	top := row("Orders.Declined: "+text, "Orders.Declined", 30)
	f := &fakeEngine{arrivals: &engine.Arrivals{Now: now, Groups: []engine.ArrivalRow{top, row("rejected", "rejected", 5)}}}
	qs := listedQueues{{Name: "orders.eu.dlq", Messages: 35}, {Name: "orders.us.dlq", Messages: 3}, {Name: "payments.dlq", Messages: 9}}
	c := &counter{n: map[string]int{"orders.eu.dlq": 12, "payments.dlq": 9}, since: map[string]time.Time{"orders.eu.dlq": since}}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: noWindows{},
		Queues: qs, Arrivals: c, GroupsSeen: st.Alerts()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := ops.SlackCaller("U0ALICE001")
	if _, err := o.Preview(ctx, alice, engine.Selection{DLQ: "orders.eu.dlq"}); err != nil {
		t.Fatal(err)
	}
	// A preview of the DLQ alice may not read, as someone else would make it.
	if err := st.Alerts().SaveGroups(ctx, "payments.dlq", engine.Arrivals{Now: now, Groups: []engine.ArrivalRow{{GroupID: "gsecret", Type: "Payments.Secret", Messages: 9}}}); err != nil {
		t.Fatal(err)
	}

	d, err := o.ListDLQs(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(c.queues)
	if !slices.Equal(c.queues, []string{"orders.eu.dlq", "orders.us.dlq"}) {
		t.Errorf("the broker was asked for the arrivals of %v, want each readable DLQ once", c.queues)
	}
	if len(d.DLQs) != 2 || d.Hidden != 1 {
		t.Fatalf("listed %+v, hidden %d", d.DLQs, d.Hidden)
	}
	eu, us := d.DLQs[0], d.DLQs[1]
	if eu.ArrivalsLastHour == nil || *eu.ArrivalsLastHour != 12 || !eu.ArrivalsSince.Equal(since) {
		t.Errorf("orders.eu.dlq arrived %v since %s, want 12 since %s", eu.ArrivalsLastHour, eu.ArrivalsSince, since)
	}
	if g := eu.TopGroup; g == nil || g.GroupID != top.GroupID || g.Type != "Orders.Declined" || g.Messages != 30 || !g.SeenAt.Equal(now) {
		t.Errorf("orders.eu.dlq's top group %+v, want %s Orders.Declined × 30 at %s", g, top.GroupID, now)
	}
	if us.ArrivalsLastHour != nil || us.TopGroup != nil {
		t.Errorf("orders.us.dlq (arrivals untold, never previewed): %+v", us)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	js := string(raw)
	if !strings.Contains(js, `"name":"orders.us.dlq","messages":3,"consumers":0,"why":"name","arrivals_last_hour":null`) {
		t.Errorf("unknown arrivals are not null: %s", js)
	}
	for _, s := range []string{text, "gsecret", "Payments.Secret", "payments.dlq"} {
		if strings.Contains(js, s) {
			t.Errorf("the list shows %q: %s", s, js)
		}
	}
}
