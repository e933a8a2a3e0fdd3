package replay_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// hidingReturns is the store's record of returns with an attacker who
// writes Redis: after every batch the tap records, tamper hides the
// replay's returns again, before anyone reads the record.
type hidingReturns struct {
	engine.Returns
	tamper func(ctx context.Context)
	mu     sync.RWMutex
}

func (h *hidingReturns) Record(ctx context.Context, dlq string, evs []engine.ReturnEvent, arrived int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.Returns.Record(ctx, dlq, evs, arrived)
	if err == nil && len(evs) > 0 {
		h.tamper(ctx)
	}
	return err
}

func (h *hidingReturns) Returned(ctx context.Context, id string, from int) (engine.ReturnRecord, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.Returns.Returned(ctx, id, from)
}

// TestTamperedReturnsNeverEndClean: a tapped replay whose consumer
// rejects half the copies, with the tap's record of them lowered,
// deleted, or lowered beside a forged floor in Redis after every batch:
// the store refuses the record and reports it, the run stops at once
// saying it could not tell, and its verdict is never clean — while the
// broker's DLQ holds the copies that came back. A resume goes on by
// re-reading the DLQ and counts them.
func TestTamperedReturnsNeverEndClean(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"lowered", "deleted", "floor forged"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tamperedReturns(t, mode)
		})
	}
}

func tamperedReturns(t *testing.T, mode string) {
	ctx := context.Background()
	b := testkit.Rabbit3
	rdb, prefix := testkit.Redis(t)
	var mu sync.Mutex
	var refused []string
	st, err := store.New(store.Config{Prefix: prefix, SigningKey: []byte("0123456789abcdef0123456789abcdef"),
		OnBadSignature: func(err *store.SignatureError) { mu.Lock(); refused = append(refused, err.Kind); mu.Unlock() }}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	br, err := amqp.New(amqp.Config{URL: b.AMQPURL, ManagementURL: b.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	var replayID string
	hide := &hidingReturns{Returns: st.Returns(), tamper: func(ctx context.Context) {
		if replayID != "" {
			hideReturns(ctx, t, rdb, prefix, replayID, mode)
		}
	}}
	svc, err := replay.New(graceful, replay.Deps{Broker: br, Mover: br, Counters: br, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Taps: br, Returns: hide, TapGaps: st.TapGaps(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Claims: testkit.ClaimsOff{}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rabbit: b.Dial(t), broker: br, store: st, svc: svc}
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.DLXTopology(src, dlq, nil)
	const n = 20
	r.Reject(src, testkit.Msgs(n, 50)...)
	r.WaitCount(dlq, n, 20*time.Second)
	p := preview(t, e, engine.Selection{DLQ: dlq, Source: src})
	if p.Returns.Mode != engine.ReturnsTap {
		t.Fatalf("returns %+v: want a tap", p.Returns)
	}
	// Copies of odd-numbered messages are rejected: they come back.
	cons := r.Consume(src, func(d amqp091.Delivery) string {
		if d.MessageId[len(d.MessageId)-1]%2 == 1 {
			return "reject"
		}
		return "ack"
	})
	ap, err := replay.Approve(svc, ctx, p.Token, "U_APP", oneStep, false)
	if err != nil {
		t.Fatal(err)
	}
	replayID = ap.Replay.ID
	rep, err := svc.Run(ctx, replayID, "owner-"+t.Name())
	if err == nil {
		t.Fatalf("run ended %s (%s, verdict %s) without an error: want ErrReturnsUnverified", rep.State, rep.Note, rep.Verdict())
	}
	if !errors.Is(err, engine.ErrReturnsUnverified) {
		t.Fatalf("run: %v: want ErrReturnsUnverified", err)
	}
	if rep.State != engine.StateStopped || rep.Verdict() == engine.VerdictClean || rep.ReturnsUnverified == "" || !strings.Contains(rep.Note, "could not tell") {
		t.Fatalf("replay %s, verdict %s, returned %d, unverified %q (%s): want stopped, not clean, saying it could not tell",
			rep.State, rep.Verdict(), rep.Returned, rep.ReturnsUnverified, rep.Note)
	}
	stored, err := st.Replays().Get(ctx, replayID)
	if err != nil || stored.Verdict() == engine.VerdictClean || stored.ReturnsUnverified == "" {
		t.Fatalf("stored replay %+v, %v: want its returns unverified", stored, err)
	}
	mu.Lock()
	kinds := strings.Join(refused, ",")
	mu.Unlock()
	if !strings.Contains(kinds, "returns") {
		t.Fatalf("refusals reported: %q, want the returns record", kinds)
	}
	// Every copy sent was taken by the consumer, and those rejected are
	// in the DLQ (counted by the broker) before the resume.
	deadline := time.Now().Add(20 * time.Second)
	for {
		acked, rejected := cons.Counts()
		if acked+rejected >= rep.Sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polls the consumer's counts for the condition
	}
	_, rejected := cons.Counts()
	if rejected == 0 {
		t.Fatal("no copy was rejected: the test proves nothing")
	}
	r.WaitCount(dlq, rejected, 20*time.Second)
	// A resume cannot use the refused record: it re-reads the DLQ, and
	// counts what came back there.
	if _, err := svc.Control(ctx, replayID, engine.ControlResume, "U_APP"); err != nil {
		t.Fatal(err)
	}
	again, err := svc.Run(ctx, replayID, "owner2-"+t.Name())
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	// By the broker: the copies of this replay that came back.
	back := 0
	for _, d := range r.Drain(dlq, rejected, 2*time.Second) {
		m := engine.Message{Headers: map[string]any(d.Headers), MessageID: d.MessageId, Body: d.Body}
		if meta := engine.ParseMetaDialect(dlq, m, engine.HeaderDialect{}); meta.ReplayID == replayID && meta.Returned {
			back++
		}
	}
	if back != rejected || rep.Returned > back {
		t.Fatalf("the DLQ holds %d copies back of the %d rejected; the run counted %d", back, rejected, rep.Returned)
	}
	if again.ReturnsMode != engine.ReturnsReread || again.Returned != back || again.Clean() || again.Verdict() != engine.VerdictCameBack {
		t.Fatalf("resumed: %s, mode %s, returned %d of the %d back, verdict %s (%s): want re-read, all counted, came back",
			again.State, again.ReturnsMode, again.Returned, back, again.Verdict(), again.Note)
	}
}

// hideReturns hides replay id's returns in Redis (under prefix) as mode
// says. The attacker is not bound by the recording's context: it may be
// cancelled (the run ended) while the record is written.
func hideReturns(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix, id, mode string) {
	ctx = context.WithoutCancel(ctx)
	h, l, f := prefix+"{"+id+"}:returns", prefix+"{"+id+"}:returnlog", prefix+"{"+id+"}:returnfloor"
	switch mode {
	case "deleted":
		rdb.Del(ctx, h, l)
		return
	}
	// Lowered to nothing, consistently: the total, its groups, counts and
	// ids, and the log; the baseline stays.
	fields, err := rdb.HKeys(ctx, h).Result()
	if err != nil {
		t.Error(err)
		return
	}
	for _, k := range fields {
		if k != "base" {
			rdb.HDel(ctx, h, k)
		}
	}
	rdb.Del(ctx, l)
	if mode == "floor forged" {
		// The floor made to match, keeping its MAC.
		raw, _ := rdb.Get(ctx, f).Result()
		parts := strings.Fields(raw)
		if len(parts) == 7 {
			parts[0], parts[2], parts[3] = "0", "0", "1"
			rdb.Set(ctx, f, strings.Join(parts, " "), 0)
		}
	}
}
