package replay_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/internal/tune"
	"github.com/stroma/dlqbot/engine/replay"
)

// TestPreviewListsFirstRowsButCountsAll previews the same DLQ with the
// full list and with ListRows=2: the short one lists only 2 messages but
// counts, summarises and freezes every one, exactly like the full one
// (same token items, targets, problems), including the ledger history and
// the extra copy of messages it does not list.
func TestPreviewListsFirstRowsButCountsAll(t *testing.T) {
	t.Parallel()
	full, short := newEnv(t, replay.Config{}), newEnv(t, replay.Config{Tune: tune.Knobs{ListRows: 2}})
	r := full.rabbit
	src, dlq := r.DeadLettered(5, 100)
	ds := snapshot(t, r, dlq, 5)
	last := ds[4]
	r.Publish(dlq, amqp.Publishing{Headers: stripDeliveryCount(last.Headers), MessageId: last.MessageId, Body: last.Body})
	r.WaitCount(dlq, 6, 20*time.Second)
	ctx := context.Background()
	p0, err := full.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if len(p0.Messages) != 5 || p0.Rows != 5 || p0.Matched != 6 || p0.Messages[4].Count != 2 {
		t.Fatalf("full preview: %d listed, rows %d, matched %d", len(p0.Messages), p0.Rows, p0.Matched)
	}
	at := time.Now().UTC().Truncate(time.Second)
	if err := full.store.Ledger().Confirm(ctx, []engine.LedgerEntry{{ReplayID: "r_00000000000000ab", DLQ: dlq, ID: p0.Messages[3].ID, Target: src, At: at}}); err != nil {
		t.Fatal(err)
	}
	// The two envs share Redis but not their key prefixes: record the send in both.
	if err := short.store.Ledger().Confirm(ctx, []engine.LedgerEntry{{ReplayID: "r_00000000000000ab", DLQ: dlq, ID: p0.Messages[3].ID, Target: src, At: at}}); err != nil {
		t.Fatal(err)
	}
	a, err := full.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := short.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U1")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Messages) != 2 || b.Rows != 5 || b.Matched != 6 || b.Selected != 6 || b.Distinct != 5 {
		t.Fatalf("short preview: %d listed, rows %d, matched %d, selected %d, distinct %d", len(b.Messages), b.Rows, b.Matched, b.Selected, b.Distinct)
	}
	if !reflect.DeepEqual(a.Messages[:2], b.Messages) {
		t.Errorf("listed rows differ:\n full  %+v\n short %+v", a.Messages[:2], b.Messages)
	}
	if !reflect.DeepEqual(a.Problems, b.Problems) || !reflect.DeepEqual(a.Targets, b.Targets) {
		t.Errorf("summary differs:\n full  %+v %+v\n short %+v %+v", a.Problems, a.Targets, b.Problems, b.Targets)
	}
	replayed := false
	for _, pr := range b.Problems {
		replayed = replayed || (pr.Kind == engine.ProblemAlreadyReplayed && pr.Messages == 1)
	}
	if !replayed {
		t.Errorf("short preview's problems %+v lack already_replayed for the unlisted message", b.Problems)
	}
	fa, err := full.store.Tokens().Load(ctx, a.Token)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := short.store.Tokens().Load(ctx, b.Token)
	if err != nil {
		t.Fatal(err)
	}
	if len(fb.Items) != 5 || !reflect.DeepEqual(fa.Items, fb.Items) || fa.Total != 6 || fb.Total != 6 {
		t.Fatalf("token items differ:\n full  %+v\n short %+v", fa.Items, fb.Items)
	}
	for i, it := range fb.Items {
		m := a.Messages[i]
		if it.ID != m.ID || it.Count != m.Count || it.Target != src || it.Group != m.FailureGroup || it.Seq != m.Seq {
			t.Errorf("token item %d is %+v, the message is %s ×%d seq %d group %q", i, it, m.ID, m.Count, m.Seq, m.FailureGroup)
		}
	}
	r.WaitCount(dlq, 6, 20*time.Second)
}
