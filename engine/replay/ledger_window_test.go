package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestLedgerWindowRefusesWhatAnotherReplaySentSincePreview: two replays
// with overlapping tokens, approved one after the other before either
// sends, and no claims (Deps.Claims nil): only the ledger's windows keep
// them apart. The first sends the overlap through its fenced windows and
// records the sends, but its acks are lost, so the originals stay in the
// DLQ (duplicates, as after a lost connection); the second then finds
// them there and its windows refuse them, naming the first. Decided at
// the consumer: every id delivered once in all.
func TestLedgerWindowRefusesWhatAnotherReplaySentSincePreview(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvTuned(t, fast, on, func(d *replay.Deps) { d.Claims = testkit.ClaimsOff{} })
		r := e.rabbit
		const overlap, onlyB = 20, 30
		src, dlq := r.DeadLettered(overlap+onlyB, 64)
		all := preview(t, e, engine.Selection{DLQ: dlq})
		var idsA, idsB []string
		for i, m := range all.Messages {
			if i < overlap {
				idsA = append(idsA, m.ID)
			}
			idsB = append(idsB, m.ID)
		}
		pa := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsA})
		pb := preview(t, e, engine.Selection{DLQ: dlq, IDs: idsB})
		ctx := context.Background()
		prm := engine.Params{Step: 100, Cap: 100, Rate: -1, Timeout: 20 * time.Second}
		apA, err := replay.Approve(e.svc, ctx, pa.Token, "U_A", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		apB, err := replay.Approve(e.svc, ctx, pb.Token, "U_B", prm, true)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		r.Consume(src, rec.handle)
		a := apA.Replay.ID
		// The approvals' reads give their messages back as they end; a
		// move made before they landed finds only some (rabbit4: 2 of 20).
		r.WaitCount(dlq, overlap+onlyB, 30*time.Second)
		sendLosingAcks(t, e, a, dlq, src, idsA)
		r.WaitCount(dlq, overlap+onlyB, 30*time.Second) // A's originals are back
		b, err := e.svc.Run(ctx, apB.Replay.ID, "owner-b")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("B: %s, sent %d, elsewhere %d, missing %d: %s", b.State, b.Sent, b.Elsewhere, b.Missing, b.Note)
		if b.Sent != onlyB || b.Elsewhere != overlap || b.Missing != 0 || b.State != engine.StateFinished {
			t.Errorf("B %s: sent %d, elsewhere %d, missing %d; want finished, %d sent, %d replayed by A", b.State, b.Sent, b.Elsewhere, b.Missing, onlyB, overlap)
		}
		if !strings.Contains(b.Note, "replayed by "+a) {
			t.Errorf("B's note does not name A (%s): %s", a, b.Note)
		}
		for _, f := range b.Failures {
			if f.Kind == engine.FailureReplayedElsewhere && !strings.HasPrefix(f.Detail, "replayed by "+a) {
				t.Errorf("%s: %s", f.ID, f.Detail)
			}
		}
		deliveredOnce(t, rec, all.Messages)
		if n := r.Count(dlq); n != overlap {
			t.Errorf("the DLQ holds %d, want A's %d originals", n, overlap)
		}
	})
}

// parseMeta is replay.ParseMeta, for sendLosingAcks, whose parameter
// replay hides the package.
var parseMeta = replay.ParseMeta

// sendLosingAcks sends the messages ids of dlq to target as a run of
// replay would, through its fenced ledger windows, and records each
// confirmed send; then the acks are lost (Confirmed fails after
// recording), so the originals stay in the DLQ.
func sendLosingAcks(t *testing.T, e *env, replay, dlq, target string, ids []string) {
	t.Helper()
	ctx := context.Background()
	epoch, ok, err := e.store.Leases().Acquire(ctx, replay, "owner-a", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	defer func() { _ = e.store.Leases().Release(ctx, replay, "owner-a") }()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	led := e.store.Ledger()
	entries := func(batch []engine.Moved, pending bool) []engine.LedgerEntry {
		es := make([]engine.LedgerEntry, len(batch))
		for i, m := range batch {
			es[i] = engine.LedgerEntry{ReplayID: replay, DLQ: dlq, ID: m.ID, Target: m.Target, Seq: m.Seq, Copy: m.Copy, Pending: pending, At: time.Now()}
		}
		return es
	}
	// A failed record stops a move after its window (the copies of one
	// window are all a move sends past it), and how many a window holds
	// depends on timing; so move again for what is left, each time after
	// the originals are back in the DLQ, until every id was sent.
	total := e.rabbit.Count(dlq) // the caller waited for the whole DLQ
	done := map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(done) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("A's moves sent %d of %d before the deadline", len(done), len(ids))
		}
		mr, err := e.broker.Move(ctx, engine.MoveRequest{
			Queue: dlq,
			Pick: func(m engine.Message) (engine.Pick, bool) {
				id := parseMeta(e.svc, dlq, m).ID
				return engine.Pick{ID: id, Target: target}, want[id] && !done[id]
			},
			Rewrite: func(h map[string]any, _ engine.Pick) map[string]any { return engine.ReplayHeaders(h, replay, target) },
			Intend: func(ctx context.Context, batch []engine.Moved) (map[string]string, error) {
				return led.IntendWindow(ctx, engine.Window{ReplayID: replay, DLQ: dlq, Owner: "owner-a", Epoch: epoch, Entries: entries(batch, true)})
			},
			Confirmed: func(ctx context.Context, batch []engine.Moved) error {
				if err := led.Confirm(ctx, entries(batch, false)); err != nil {
					return err
				}
				return errors.New("the acks are lost")
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(mr.Sent) != 0 {
			t.Fatalf("A's move acked %d originals although every record failed", len(mr.Sent))
		}
		for _, f := range mr.Failed {
			if f.Kind != engine.MoveUnrecorded {
				t.Fatalf("A's move: %s failed as %v (%s)", f.ID, f.Kind, f.Detail)
			}
			done[f.ID] = true
		}
		t.Logf("A's move: %d of %d sent so far", len(done), len(ids))
		e.rabbit.WaitCount(dlq, total, 30*time.Second) // the originals are back
	}
}

// TestStaleOwnersWindowPublishesNothing: a move whose windows carry a
// lease the run no longer holds (the next run took it) is refused at its
// first window: nothing reaches the target and every original stays in
// the DLQ, as the broker counts them.
func TestStaleOwnersWindowPublishesNothing(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		src, dlq := r.DeadLettered(40, 64)
		ctx := context.Background()
		rid := "r_" + strings.ReplaceAll(testkit.Name("stale"), ".", "_")
		epoch, ok, err := e.store.Leases().Acquire(ctx, rid, "old-owner", time.Minute)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if err := e.store.Leases().Release(ctx, rid, "old-owner"); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := e.store.Leases().Acquire(ctx, rid, "new-owner", time.Minute); err != nil || !ok {
			t.Fatal(ok, err)
		}
		led := e.store.Ledger()
		mr, err := e.broker.Move(ctx, engine.MoveRequest{
			Queue: dlq,
			Pick: func(m engine.Message) (engine.Pick, bool) {
				return engine.Pick{ID: engine.ParseMetaDialect(dlq, m, engine.HeaderDialect{}).ID, Target: src}, true
			},
			Intend: func(ctx context.Context, batch []engine.Moved) (map[string]string, error) {
				es := make([]engine.LedgerEntry, len(batch))
				for i, m := range batch {
					es[i] = engine.LedgerEntry{ReplayID: rid, DLQ: dlq, ID: m.ID, Target: m.Target, Seq: m.Seq, Copy: m.Copy, Pending: true}
				}
				return led.IntendWindow(ctx, engine.Window{ReplayID: rid, DLQ: dlq, Owner: "old-owner", Epoch: epoch, Entries: es})
			},
			Confirmed: func(context.Context, []engine.Moved) error { return errors.New("nothing may be confirmed") },
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(mr.Stopped, engine.ErrLeaseLost) || len(mr.Sent) != 0 || len(mr.Failed) != 0 {
			t.Fatalf("stopped %v, %d sent, %d failed; want ErrLeaseLost and nothing sent", mr.Stopped, len(mr.Sent), len(mr.Failed))
		}
		r.WaitCount(dlq, 40, 30*time.Second)
		if n := r.Count(src); n != 0 {
			t.Errorf("the target holds %d copies", n)
		}
		if es, err := led.Entries(ctx, rid); err != nil || len(es) != 0 {
			t.Errorf("the stale windows were recorded: %d entries, %v", len(es), err)
		}
	})
}

// TestResumeReadsTheLedgerInPages: a paced replay writes windows of ten
// copies, so its ledger spans several pages when it is paused; resumed,
// it sends exactly the rest, each once.
func TestResumeReadsTheLedgerInPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	const n = 500
	src, dlq := r.DeadLettered(n, 32)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	rec := &recorder{}
	r.Consume(src, rec.handle)
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", engine.Params{Step: n, Cap: n, Rate: 100, Timeout: 30 * time.Second}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ap.Replay.ID
	done := make(chan engine.Replay, 1)
	go func() { rep, _ := e.svc.Run(ctx, id, "owner-1"); done <- rep }()
	// More windows than one page holds (32 records of 10 copies). The
	// replay's own count, not the consumer's: under load deliveries lag
	// the sends by more than the 150 copies left.
	testkit.Eventually(t, 60*time.Second, "350 copies sent", func() bool {
		cur, err := e.svc.Status(ctx, id)
		return err == nil && cur.Sent >= 350
	})
	if _, err := e.svc.Control(ctx, id, engine.ControlPause, "U_PAUSER"); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	if rep.State != engine.StatePaused || rep.Sent >= n {
		t.Fatalf("%s after %d sent: want a paused, partial replay", rep.State, rep.Sent)
	}
	pages := 0
	for from := int64(0); from >= 0; pages++ {
		_, next, err := e.store.Ledger().EntriesPage(ctx, id, from)
		if err != nil {
			t.Fatal(err)
		}
		from = next
	}
	if pages < 2 {
		t.Fatalf("the ledger of %d sends is %d page(s): the test needs several", rep.Sent, pages)
	}
	if _, err := e.svc.Control(ctx, id, engine.ControlResume, "U_RESUMER"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.svc.Run(ctx, id, "owner-2")
	if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
		t.Fatalf("resumed: %s, %d sent, %v: %s", rep.State, rep.Sent, err, rep.Note)
	}
	deliveredOnce(t, rec, p.Messages)
	if es, err := e.store.Ledger().Entries(ctx, id); err != nil || len(es) != n {
		t.Errorf("ledger: %d entries, %v", len(es), err)
	}
}

// TestResumeFromThePreviousLedgerLayout: a replay the previous release
// began (its ledger: an intent record and a confirm record with full
// entries, the DLQ's index written at confirm) is run after the upgrade:
// it sends exactly the rest, each once, and a check counts every send.
func TestResumeFromThePreviousLedgerLayout(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, func(t *testing.T, on testkit.Broker) {
		t.Parallel()
		e := newEnvOn(t, fast, on)
		r := e.rabbit
		const n, before = 30, 10
		src, dlq := r.DeadLettered(n, 64)
		p := preview(t, e, engine.Selection{DLQ: dlq})
		rec := &recorder{}
		r.Consume(src, rec.handle)
		ctx := context.Background()
		ap, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false)
		if err != nil {
			t.Fatal(err)
		}
		id := ap.Replay.ID
		// The previous release moved the first ten, writing its layout.
		first := map[string]bool{}
		for _, m := range p.Messages[:before] {
			first[m.ID] = true
		}
		mr, err := e.broker.Move(ctx, engine.MoveRequest{
			Queue: dlq,
			Pick: func(m engine.Message) (engine.Pick, bool) {
				mid := engine.ParseMetaDialect(dlq, m, engine.HeaderDialect{}).ID
				return engine.Pick{ID: mid, Target: src}, first[mid]
			},
			Rewrite: func(h map[string]any, _ engine.Pick) map[string]any { return engine.ReplayHeaders(h, id, src) },
		})
		if err != nil || len(mr.Sent) != before {
			t.Fatalf("the previous release's move: %d sent, %v", len(mr.Sent), err)
		}
		writeOldLedger(t, id, dlq, mr.Sent)
		err = e.store.Replays().UpdateUnowned(ctx, id, func(cur *engine.Replay) error { cur.Sent = before; return nil })
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.svc.Run(ctx, id, "owner")
		if err != nil || rep.State != engine.StateFinished || rep.Sent != n {
			t.Fatalf("after the upgrade: %s, %d sent, %v: %s", rep.State, rep.Sent, err, rep.Note)
		}
		deliveredOnce(t, rec, p.Messages)
		c, err := e.svc.Check(ctx, id, "")
		if err != nil || c.Replayed != n {
			t.Errorf("check: %d replayed, %v; want %d", c.Replayed, err, n)
		}
	})
}

// writeOldLedger writes replay id's ledger for moved as the previous
// release did: an intent record, then a confirm record, both with full
// entries, and the DLQ's sent index at confirm. The store's prefix is
// found from the replay's record.
func writeOldLedger(t *testing.T, id, dlq string, moved []engine.Moved) {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(testkit.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	var keys []string
	iter := rdb.Scan(ctx, 0, "*{"+id+"}:replay", 10000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil || len(keys) != 1 {
		t.Fatalf("the replay's record: %v %v", keys, err)
	}
	prefix := strings.TrimSuffix(keys[0], "{"+id+"}:replay")
	type entry struct {
		ID     string `json:"i"`
		Target string `json:"t"`
		Seq    int    `json:"s"`
		Copy   string `json:"c,omitempty"`
	}
	es := make([]entry, len(moved))
	for i, m := range moved {
		es[i] = entry{ID: m.ID, Target: m.Target, Seq: m.Seq, Copy: m.Copy}
	}
	ms := time.Now().UnixMilli()
	rec := func(kind string) string {
		b, err := json.Marshal(map[string]any{"k": kind, "a": ms, "q": dlq, "e": es})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	pipe := rdb.TxPipeline()
	pipe.RPush(ctx, prefix+"{"+id+"}:ledger", rec("i"), rec("c"))
	for _, m := range moved {
		pipe.HSet(ctx, prefix+"sent:"+dlq, m.ID, fmt.Sprintf("%s:%d:1", id, ms))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// deliveredOnce waits until rec has a delivery per message of msgs and
// checks that it got each once and nothing else.
func deliveredOnce(t *testing.T, rec *recorder, msgs []engine.PreviewMessage) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "every copy at the consumer", func() bool { return len(rec.got()) >= len(msgs) })
	by := ids(rec.got())
	for _, m := range msgs {
		if by[m.MessageID] != 1 {
			t.Errorf("%s delivered %d times", m.MessageID, by[m.MessageID])
		}
	}
	if got := len(rec.got()); got != len(msgs) {
		t.Errorf("%d deliveries, want %d", got, len(msgs))
	}
}
