package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

// TestAlertNamesTheGroupsTheLastWholePreviewSaw: an alert names the top
// failure groups of the DLQ's latest preview of the whole DLQ by id, type
// and count, with no exception text anywhere in what the poster gets; a
// narrowed preview does not replace them; a DLQ never previewed has none
// (the alert asks for a preview).
func TestAlertNamesTheGroupsTheLastWholePreviewSaw(t *testing.T) {
	t.Parallel()
	p, err := commands.ParsePolicy([]byte(policy))
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	const text = "currency XTS not supported for customer John Roe"
	row := func(key, typ string, n int) engine.ArrivalRow {
		return engine.ArrivalRow{Key: key, GroupID: engine.GroupID(key), Type: typ, Messages: n, Last: now, Counts: []int{n}}
	}
	whole := &engine.Arrivals{Now: now, ArrivalRow: engine.ArrivalRow{Messages: 46},
		Groups: []engine.ArrivalRow{row("java.lang.IllegalArgumentException: "+text, "java.lang.IllegalArgumentException", 30),
			row("order <n> not found", "rejected", 10), row("timeout while calling "+text, "java.net.SocketTimeoutException", 4), row("x", "", 2)}}
	f := &fakeEngine{arrivals: whole}
	o, err := ops.New(ops.Config{Policy: p}, ops.Deps{Engine: f, Tokens: f, Replays: f, Windows: st.Windows(), GroupsSeen: st.Alerts()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := ops.SlackCaller("U0ALICE001")
	if _, err := o.Preview(ctx, alice, engine.Selection{DLQ: "orders.eu.dlq"}); err != nil {
		t.Fatal(err)
	}
	f.arrivals = &engine.Arrivals{Now: now, Groups: []engine.ArrivalRow{row("narrow "+text, "com.acme.Narrow", 1)}}
	if _, err := o.Preview(ctx, alice, engine.Selection{DLQ: "orders.eu.dlq", Reason: engine.ReasonRejected}); err != nil {
		t.Fatal(err)
	}

	clock := &manualClock{now: now}
	d := &depths{m: map[string]int{"orders.eu.dlq": 0, "orders.us.dlq": 0}}
	pst := &poster{shown: map[string]ops.Alert{}, edits: map[string]int{}}
	rules := []commands.WatchRule{{Queues: []string{"orders.*.dlq"}, Channel: "C0INCIDENT", Threshold: 10, Within: 5 * time.Minute}}
	w, err := o.NewWatcher(ops.WatchConfig{Rules: rules}, ops.WatchDeps{Depths: d, Alerts: st.Alerts(), Poster: pst, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	w.Tick(ctx)
	clock.now = clock.now.Add(time.Minute)
	d.m = map[string]int{"orders.eu.dlq": 30, "orders.us.dlq": 30}
	w.Tick(ctx)
	if pst.posts != 2 {
		t.Fatalf("%d alerts posted, want 2", pst.posts)
	}
	for _, a := range pst.shown {
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "John Roe") || strings.Contains(string(raw), "not found") {
			t.Errorf("the alert of %s carries an exception's text: %s", a.DLQ, raw)
		}
		switch a.DLQ {
		case "orders.us.dlq":
			if a.Seen != nil {
				t.Errorf("the alert of a DLQ never previewed names groups: %+v", a.Seen)
			}
		case "orders.eu.dlq":
			if a.Seen == nil || len(a.Seen.Groups) != 3 {
				t.Fatalf("the alert names %+v, want the whole preview's top 3 groups", a.Seen)
			}
			g := a.Seen.Groups[0]
			if g.GroupID != whole.Groups[0].GroupID || g.Type != "java.lang.IllegalArgumentException" || g.Messages != 30 || a.Seen.MoreGroups != 2 || !a.Seen.Now.Equal(now) {
				t.Errorf("the alert's groups: %+v (more %d, at %s)", a.Seen.Groups, a.Seen.MoreGroups, a.Seen.Now)
			}
		}
	}
}
