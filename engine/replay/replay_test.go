package replay_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/internal/tune"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// fast makes steps settle quickly in tests.
// LeaseTTL is the default: heartbeats beside make test's other lanes came
// later than 3 s, and once (at 10 s) a run lost its lease mid-save.
// StepChunk is small so that every step larger than 64 copies in the tests
// (one step of a few hundred, the later canary steps) is sent in chunks,
// as a step of more than 10,000 is by default.
var fast = replay.Config{SettleGrace: 300 * time.Millisecond, SettlePoll: 50 * time.Millisecond, ControlPoll: 50 * time.Millisecond, LeaseTTL: 15 * time.Second, Tune: tune.Knobs{StepChunk: 64}}

// oneStep sends everything in one unpaced step.
var oneStep = engine.Params{Step: 100000, Cap: 100000, Rate: -1, Timeout: 20 * time.Second}

func preview(t *testing.T, e *env, sel engine.Selection) *engine.Preview {
	t.Helper()
	p, err := e.svc.Preview(context.Background(), sel, "U_REQ")
	if err != nil {
		t.Fatal(err)
	}
	if p.Token == "" {
		t.Fatalf("preview of %s made no token: %d selected, read %+v, problems %+v", sel, p.Selected, p.Coverage, p.Problems)
	}
	return p
}

func approveRun(t *testing.T, e *env, token string, prm engine.Params, confirmed bool) engine.Replay {
	t.Helper()
	ctx := context.Background()
	ap, err := replay.Approve(e.svc, ctx, token, "U_APP", prm, confirmed)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Run(ctx, ap.Replay.ID, "owner-"+t.Name())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return r
}

// runAsync runs replay id on e in the background (owner "owner") and
// hands its final record over the returned channel; a run that fails
// while the test runs fails t. When the test ends first (it failed), the
// run is shut down and waited for, so it never outlives its test.
func runAsync(t *testing.T, e *env, id string) <-chan engine.Replay {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan engine.Replay, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		rep, err := e.svc.Run(ctx, id, "owner")
		if err != nil && ctx.Err() == nil {
			t.Errorf("run: %v", err)
		}
		done <- rep
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return done
}

// recorder is a consumer that acks and keeps every delivery.
type recorder struct {
	mu sync.Mutex
	ds []amqp.Delivery
	// verdict is what the consumer does with each delivery: "ack" when
	// empty, or a testkit.Handler verdict such as "reject".
	verdict string
	// then, when set (setThen), handles each delivery once recorded, and
	// its verdict is the consumer's.
	then func(amqp.Delivery) string
}

// setThen sets rc.then, while the consumer may be running.
func (rc *recorder) setThen(f func(amqp.Delivery) string) {
	rc.mu.Lock()
	rc.then = f
	rc.mu.Unlock()
}

func (rc *recorder) handle(d amqp.Delivery) string {
	rc.mu.Lock()
	rc.ds = append(rc.ds, d)
	then := rc.then
	rc.mu.Unlock()
	if then != nil {
		return then(d)
	}
	if rc.verdict != "" {
		return rc.verdict
	}
	return "ack"
}

func (rc *recorder) got() []amqp.Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]amqp.Delivery(nil), rc.ds...)
}

func ids(ds []amqp.Delivery) map[string]int {
	m := map[string]int{}
	for _, d := range ds {
		m[d.MessageId]++
	}
	return m
}

func TestReplayAppliesExactlyThePreview(t *testing.T) {
	t.Parallel()
	for _, c := range testkit.Matrix("classic", "quorum-with-limit") {
		t.Run(c.Name(), func(t *testing.T) {
			t.Parallel()
			c.Broker.Require(t)
			var args amqp.Table
			if c.Kind != "classic" {
				args = testkit.Quorum(amqp.Table{"x-delivery-limit": 20})
			}
			replayExactly(t, c.Broker, args)
		})
	}
}

func replayExactly(t *testing.T, on testkit.Broker, dlqArgs amqp.Table) {
	e := newEnvOn(t, fast, on)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, dlqArgs)
	msgs := testkit.Msgs(20, 200)
	msgs[3] = msgs[2] // two identical copies: the multiset counts both
	before := time.Now().Unix()
	r.Reject(src, msgs...)
	r.WaitCount(dlq, 20, 20*time.Second)
	after := time.Now().Unix()
	p := preview(t, e, engine.Selection{DLQ: dlq})
	// The identical pair is one fingerprint when the broker dead-lettered
	// both within one second: the fingerprint holds the first death's time
	// in Unix seconds (engine/letter/fingerprint.go), so rejects either side of a
	// second's turn are two distinct copies. Only a fill that began and
	// ended (all 20 in the DLQ) within one second is sure to be 19.
	if p.Selected != 20 || (p.Distinct != 19 && (before == after || p.Distinct != 20)) {
		t.Fatalf("selected %d distinct %d, want 20 and 19 (or 20: the fill spanned Unix seconds %d to %d)", p.Selected, p.Distinct, before, after)
	}
	if p.Distinct == 20 {
		t.Logf("the identical pair died in two seconds (the fill spanned %d to %d): 20 distinct", before, after)
	}
	// Dead-lettered after the preview: must stay.
	late := []amqp.Publishing{testkit.Msg("late-0", []byte("l0"), nil), testkit.Msg("late-1", []byte("l1"), nil)}
	r.Reject(src, late...)
	r.WaitCount(dlq, 22, 20*time.Second)

	rec := &recorder{}
	r.Consume(src, rec.handle)
	rep := approveRun(t, e, p.Token, oneStep, false)
	if rep.State != engine.StateFinished || rep.Sent != 20 || rep.Missing != 0 || rep.Failed != 0 {
		t.Fatalf("replay %+v, want finished with 20 sent", rep)
	}
	testkit.Eventually(t, 20*time.Second, "20 deliveries", func() bool { return len(rec.got()) == 20 })
	want := ids(nil)
	for _, m := range msgs {
		want[m.MessageId]++
	}
	if got := ids(rec.got()); !reflect.DeepEqual(got, want) {
		t.Fatalf("target got %v, want %v", got, want)
	}
	left := r.Drain(dlq, 2, 2*time.Second)
	if got := ids(left); !reflect.DeepEqual(got, map[string]int{"late-0": 1, "late-1": 1}) {
		t.Fatalf("DLQ keeps %v, want only the two late messages", got)
	}
	entries, err := e.store.Ledger().Entries(context.Background(), rep.ID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed := 0
	for _, en := range entries {
		if !en.Pending {
			confirmed++
		}
	}
	if confirmed != 20 {
		t.Fatalf("ledger has %d confirmed sends, want 20", confirmed)
	}
}

func TestReplayToScratchKeepsMessagesByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	src, dlq, scratch := testkit.Name("src"), testkit.Name("dlq"), testkit.Name("scratch")
	r.Topology(src, dlq, nil)
	r.Queue(scratch, nil)
	big := make([]byte, 5<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	odd := []amqp.Publishing{
		{Body: []byte{0, 1, 2, 0xff, 0xfe}, DeliveryMode: amqp.Persistent}, // no message_id, binary
		{MessageId: "big", Body: big},
		{MessageId: "nested", Body: []byte("n"), Headers: amqp.Table{
			"table": amqp.Table{"a": int32(1), "b": amqp.Table{"c": "d"}}, "array": []any{"x", int32(2), amqp.Table{"e": true}},
			"bytes": []byte{1, 2, 3}, "f": 1.5, "ts": time.Unix(1700000000, 0)}},
		{MessageId: "all", Body: []byte("props"), ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: amqp.Persistent,
			Priority: 3, CorrelationId: "corr", ReplyTo: "reply.q", Expiration: "600000", Timestamp: time.Unix(1700000001, 0),
			Type: "order.created", UserId: "guest", AppId: "shop", Headers: amqp.Table{"k": "v"}},
		{MessageId: "stays", Body: []byte("stays")},
	}
	r.Reject(src, odd...)
	r.WaitCount(dlq, 5, 20*time.Second)
	before := snapshot(t, r, dlq, 5)
	p := preview(t, e, engine.Selection{DLQ: dlq, To: scratch, Limit: 4})
	rec := &recorder{}
	r.Consume(scratch, rec.handle)
	rep := approveRun(t, e, p.Token, oneStep, false)
	if rep.State != engine.StateFinished || rep.Sent != 4 {
		t.Fatalf("replay %+v, want finished with 4 sent", rep)
	}
	testkit.Eventually(t, 20*time.Second, "4 deliveries", func() bool { return len(rec.got()) == 4 })
	for i, got := range rec.got() {
		want := before[i]
		if string(got.Body) != string(want.Body) || got.MessageId != want.MessageId || got.ContentType != want.ContentType ||
			got.ContentEncoding != want.ContentEncoding || got.DeliveryMode != want.DeliveryMode || got.Priority != want.Priority ||
			got.CorrelationId != want.CorrelationId || got.ReplyTo != want.ReplyTo || got.Expiration != want.Expiration ||
			!got.Timestamp.Equal(want.Timestamp) || got.Type != want.Type || got.UserId != want.UserId || got.AppId != want.AppId {
			t.Fatalf("copy %d differs from the original:\n got  %+v\n want %+v", i, got, want)
		}
		wantH := amqp.Table{}
		for k, v := range want.Headers {
			switch k {
			case "x-death", "x-first-death-queue", "x-first-death-reason", "x-first-death-exchange", "x-last-death-queue", "x-last-death-reason", "x-last-death-exchange":
			default:
				wantH[k] = v
			}
		}
		wantH["x-replay-id"] = rep.ID
		wantH["x-replay-count"] = int32(1)
		wantH["stroma.dlq.replayed_from"] = src // the source, not the DLQ (docs/design.md "Replaying: confirm, record, then ack")
		if tag, ok := got.Headers["x-dlqbot-copy"].(string); ok && tag != "" {
			wantH["x-dlqbot-copy"] = tag // a per-copy id, for matching bounces (basic.return) exactly
		} else {
			t.Errorf("copy %d has no x-dlqbot-copy header", i)
		}
		if !reflect.DeepEqual(got.Headers, wantH) {
			t.Fatalf("copy %d headers:\n got  %#v\n want %#v", i, got.Headers, wantH)
		}
	}
	testkit.DeleteQueue(scratch)
	left := r.Drain(dlq, 1, 2*time.Second)
	if len(left) != 1 || left[0].MessageId != "stays" || !reflect.DeepEqual(left[0].Headers, before[4].Headers) {
		t.Fatalf("DLQ after deleting the scratch queue: %v", ids(left))
	}
}

func TestReplayLeavesMessagesForADeletedTarget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	a, b, dlq := testkit.Name("a"), testkit.Name("b"), testkit.Name("dlq")
	r.Topology(a, dlq, nil)
	r.Queue(b, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	r.Reject(a, testkit.Msg("a-0", []byte("a0"), nil), testkit.Msg("a-1", []byte("a1"), nil))
	r.Reject(b, testkit.Msg("b-0", []byte("b0"), nil), testkit.Msg("b-1", []byte("b1"), nil), testkit.Msg("b-2", []byte("b2"), nil))
	r.WaitCount(dlq, 5, 20*time.Second)
	rec := &recorder{}
	r.Consume(a, rec.handle)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	testkit.DeleteQueue(b)

	ctx := context.Background()
	_, err := replay.Approve(e.svc, ctx, p.Token, "U_APP", oneStep, false)
	if !errors.Is(err, engine.ErrChanged) {
		t.Fatalf("approve after a target was deleted: %v, want ErrChanged", err)
	}
	r.WaitCount(dlq, 5, 10*time.Second) // refused: nothing moved
	rep := approveRun(t, e, p.Token, oneStep, true)
	if rep.Sent != 2 || rep.Failed != 3 {
		t.Fatalf("replay %+v: want 2 sent, 3 not delivered", rep)
	}
	for _, f := range rep.Failures {
		if f.Kind != engine.FailureUnroutable || f.Target != b {
			t.Errorf("failure %+v, want unroutable to %s", f, b)
		}
	}
	left := r.Drain(dlq, 3, 2*time.Second)
	if got := ids(left); !reflect.DeepEqual(got, map[string]int{"b-0": 1, "b-1": 1, "b-2": 1}) {
		t.Fatalf("DLQ keeps %v, want b's three", got)
	}
	testkit.Eventually(t, 10*time.Second, "a's two", func() bool { return len(rec.got()) == 2 })
}

func TestTokenStartsOneReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fast)
	r := e.rabbit
	_, dlq := r.DeadLettered(3, 50)
	p := preview(t, e, engine.Selection{DLQ: dlq})
	var wg sync.WaitGroup
	var mu sync.Mutex
	okN, used := 0, 0
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := replay.Approve(e.svc, context.Background(), p.Token, fmt.Sprintf("U%d", i), oneStep, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				okN++
			case errors.Is(err, engine.ErrTokenUsed):
				used++
			default:
				t.Errorf("approve: %v", err)
			}
		}()
	}
	wg.Wait()
	if okN != 1 || used != 9 {
		t.Fatalf("%d approvals succeeded and %d were refused as used, want 1 and 9", okN, used)
	}
	rs, err := e.store.Replays().List(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("%d replays created, want 1", len(rs))
	}
}
