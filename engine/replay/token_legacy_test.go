package replay_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	engamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/legacytoken"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// TestLegacyTokenReplaysExactly: a preview token stored in the JSON/gzip
// format of earlier releases (written by the encoder they used; consumed
// tokens are kept 30 days) is approved and replayed in several steps: the
// target receives exactly the previewed multiset, the DLQ keeps only what
// was dead-lettered after the preview, and the ledger confirms every copy.
func TestLegacyTokenReplaysExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	on := testkit.Rabbit3
	b, err := engamqp.New(engamqp.Config{URL: on.AMQPURL, ManagementURL: on.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	svc, err := replay.New(fast, replay.Deps{Broker: b, Mover: b, Counters: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Taps: b, Returns: st.Returns(), Jobs: st.Jobs(), Registry: st.Workers(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rabbit: on.Dial(t), broker: b, store: st, svc: svc}
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	msgs := testkit.Msgs(300, 100) // over the legacy encoder's 256 items: its streamed, gzip form
	// Dead letters of one death time, published as the broker writes them:
	// two rejections by the broker can fall in two seconds, and a copy
	// that died in another second is another message.
	died := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i := range msgs {
		msgs[i].Headers = testkit.DeathHeaders(src, died)
	}
	msgs[3] = msgs[2] // two identical copies: the multiset counts both
	r.Publish(dlq, msgs...)
	r.WaitCount(dlq, 300, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	if p.Selected != 300 || p.Distinct != 299 {
		t.Fatalf("selected %d distinct %d, want 300 299", p.Selected, p.Distinct)
	}

	// Rewrite the stored token in the earlier format, under the same key
	// (store/keys.go: prefix, the token in braces, ":token") and TTL.
	f, err := st.Tokens().Load(ctx, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	old, err := legacytoken.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(old) < 2 || old[0] != 0x1f || old[1] != 0x8b {
		t.Fatal("the legacy encoder did not write gzip")
	}
	key := prefix + "{" + p.Token + "}:token"
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil || ttl <= 0 {
		t.Fatalf("token key %s: TTL %s, %v", key, ttl, err)
	}
	if err := rdb.Set(ctx, key, old, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	h, err := st.Tokens().LoadHeader(ctx, p.Token)
	if err != nil || h.Distinct != 299 || h.Total != 300 || !reflect.DeepEqual(h.TargetQueues(), []string{src}) {
		t.Fatalf("legacy header %+v, %v", h, err)
	}

	late := []amqp.Publishing{testkit.Msg("late-0", []byte("l0"), nil)}
	r.Reject(src, late...)
	r.WaitCount(dlq, 301, 20*time.Second)
	rec := &recorder{}
	r.Consume(src, rec.handle)
	rep := approveRun(t, e, p.Token, engine.Params{Step: 50, Cap: 100, Rate: -1, Timeout: 20 * time.Second}, false)
	if rep.State != engine.StateFinished || rep.Sent != 300 || rep.Missing != 0 || rep.Failed != 0 || rep.Step < 3 {
		t.Fatalf("replay %+v, want finished with 300 sent in several steps", rep)
	}
	testkit.Eventually(t, 20*time.Second, "300 deliveries", func() bool { return len(rec.got()) == 300 })
	want := ids(nil)
	for _, m := range msgs {
		want[m.MessageId]++
	}
	if got := ids(rec.got()); !reflect.DeepEqual(got, want) {
		t.Fatalf("target got %d ids, want the previewed %d", len(got), len(want))
	}
	left := r.Drain(dlq, 1, 2*time.Second)
	if got := ids(left); !reflect.DeepEqual(got, map[string]int{"late-0": 1}) {
		t.Fatalf("DLQ keeps %v, want only the late message", got)
	}
	entries, err := st.Ledger().Entries(ctx, rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := 0
	for _, en := range entries {
		if !en.Pending {
			confirmed++
		}
	}
	if confirmed != 300 {
		t.Fatalf("ledger has %d confirmed sends, want 300", confirmed)
	}
}
