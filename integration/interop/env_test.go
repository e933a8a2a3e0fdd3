package interop_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	dlqamqp "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// fast makes canary steps settle quickly. Its lease is long: no test here
// takes a replay over, and beside make test's other lanes a heartbeat can
// miss a 10-second lease (the run then stops, lease lost).
var fast = replay.Config{SettleGrace: 500 * time.Millisecond, SettlePoll: 100 * time.Millisecond,
	ControlPoll: 100 * time.Millisecond, LeaseTTL: 30 * time.Second}

// oneStep sends a whole selection of up to 100 messages in one unpaced step.
var oneStep = engine.Params{Step: 100, Cap: 100, Rate: -1, Timeout: 45 * time.Second}

// env is one test's engine on one broker and the real Redis.
type env struct {
	b      testkit.Broker
	rabbit *testkit.Rabbit
	svc    *replay.Service
}

func newEnv(t *testing.T, b testkit.Broker, cfg replay.Config) *env {
	t.Helper()
	br, err := dlqamqp.New(dlqamqp.Config{URL: b.AMQPURL, ManagementURL: b.ManagementURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := replay.New(cfg, replay.Deps{Broker: br, Mover: br, Counters: br, Watches: br, Tokens: st.Tokens(),
		Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{b: b, rabbit: b.Dial(t), svc: svc}
}

func (e *env) preview(t *testing.T, sel engine.Selection) *engine.Preview {
	t.Helper()
	p, err := e.svc.Preview(context.Background(), sel, "U_REQ")
	if err != nil {
		t.Fatalf("preview %s: %v", sel, err)
	}
	return p
}

// replay approves token and runs the replay in this process to its end.
func (e *env) replay(t *testing.T, token string) engine.Replay {
	t.Helper()
	ctx := context.Background()
	ap, err := e.svc.ApproveConfirmed(ctx, token, "U_APP", "", oneStep, "")
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	r, err := e.svc.Run(ctx, ap.Replay.ID, "interop-"+t.Name())
	if err != nil {
		t.Fatalf("run %s: %v", ap.Replay.ID, err)
	}
	return r
}

// checkUntil runs check on replay id until it counts want returned copies.
func (e *env) checkUntil(t *testing.T, id string, want int) engine.CheckReport {
	t.Helper()
	var c engine.CheckReport
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("check %s to count %d returned", id, want), func() bool {
		var err error
		c, err = e.svc.Check(context.Background(), id, "interop")
		if err != nil {
			t.Fatalf("check %s: %v", id, err)
		}
		return c.Returned >= want
	})
	return c
}

// peek reads every message of queue without removing it: a consumer reads
// the first n deliveries (prefetch n), then returns every one with
// nack(multiple, requeue).
func (e *env) peek(t *testing.T, queue string, n int) []amqp.Delivery {
	t.Helper()
	ch := e.rabbit.Channel()
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatal(err)
	}
	tag := testkit.Name("peek")
	ds, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		t.Fatalf("peek %s: %v", queue, err)
	}
	var out []amqp.Delivery
	for len(out) < n {
		select {
		case d := <-ds:
			out = append(out, d)
		case <-time.After(30 * time.Second):
			t.Fatalf("peek %s: %d of %d messages", queue, len(out), n)
		}
	}
	if err := ch.Cancel(tag, false); err != nil {
		t.Fatal(err)
	}
	// Tag 0 with multiple: every delivery outstanding on the channel.
	if err := ch.Nack(0, true, true); err != nil {
		t.Fatal(err)
	}
	return out
}

// props is a delivery's AMQP properties, for comparing copies.
type props struct {
	ContentType, ContentEncoding, CorrelationID, ReplyTo, Expiration, MessageID, Type, UserID, AppID string
	DeliveryMode, Priority                                                                           uint8
	Timestamp                                                                                        time.Time
}

func propsOf(d amqp.Delivery) props {
	return props{d.ContentType, d.ContentEncoding, d.CorrelationId, d.ReplyTo, d.Expiration, d.MessageId, d.Type,
		d.UserId, d.AppId, d.DeliveryMode, d.Priority, d.Timestamp}
}

// wantCopyHeaders is what a replayed copy of orig must carry (docs/design.md,
// "Replaying: confirm, record, then ack"): orig's headers without the death headers, CC and BCC, and
// rascal's error and recovery state for source, plus the replay's headers.
func wantCopyHeaders(orig amqp.Table, replayID, source string) amqp.Table {
	want := amqp.Table{}
	for k, v := range orig {
		if engine.IsRemovedHeader(k) {
			continue
		}
		want[k] = v
	}
	if r, ok := orig["rascal"].(amqp.Table); ok {
		nr := amqp.Table{}
		for k, v := range r {
			if k != "error" {
				nr[k] = v
			}
		}
		if rec, ok := r["recovery"].(amqp.Table); ok {
			nrec := amqp.Table{}
			for q, v := range rec {
				if q != source {
					nrec[q] = v
				}
			}
			nr["recovery"] = nrec
		}
		want["rascal"] = nr
	}
	var prev int32
	switch n := orig["x-replay-count"].(type) {
	case int8:
		prev = int32(n)
	case uint8:
		prev = int32(n)
	case int16:
		prev = int32(n)
	case uint16:
		prev = int32(n)
	case int32:
		prev = n
	case int64:
		prev = int32(n)
	}
	want["x-replay-id"] = replayID
	want["x-replay-count"] = prev + 1
	want["stroma.dlq.replayed_from"] = source
	return want
}

// sameCopy fails unless copy is orig byte for byte (body, properties) with
// only the documented header changes.
func sameCopy(t *testing.T, orig, copy amqp.Delivery, replayID, source string) {
	t.Helper()
	if string(orig.Body) != string(copy.Body) {
		t.Errorf("message %s: body changed", orig.MessageId)
	}
	if propsOf(orig) != propsOf(copy) {
		t.Errorf("message %s: properties changed:\n orig %+v\n copy %+v", orig.MessageId, propsOf(orig), propsOf(copy))
	}
	want := wantCopyHeaders(orig.Headers, replayID, source)
	// x-dlqbot-copy is each copy's own id (docs/design.md "Replaying: confirm, record, then ack"): present, and
	// new for this copy.
	if tag, ok := copy.Headers["x-dlqbot-copy"].(string); ok && tag != "" && tag != orig.Headers["x-dlqbot-copy"] {
		want["x-dlqbot-copy"] = tag
	} else {
		t.Errorf("message %s: copy has no x-dlqbot-copy of its own: %v", orig.MessageId, copy.Headers["x-dlqbot-copy"])
	}
	if !reflect.DeepEqual(want, copy.Headers) {
		t.Errorf("message %s: headers:\n got %#v\nwant %#v", orig.MessageId, copy.Headers, want)
	}
}

// publishN publishes n persistent JSON messages m-0…m-(n-1) to queue, each
// with a few application headers of different AMQP types.
func publishN(t *testing.T, r *testkit.Rabbit, queue string, n int) map[string][]byte {
	t.Helper()
	bodies := map[string][]byte{}
	var msgs []amqp.Publishing
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m-%d", i)
		m := testkit.Msg(id, testkit.Body(i, 200), amqp.Table{"tenant": "acme", "seq": int32(i), "tags": []any{"a", "b"}})
		m.CorrelationId = "corr-" + id
		m.AppId = "checkout"
		m.Timestamp = time.Unix(1764500000+int64(i), 0)
		bodies[id] = m.Body
		msgs = append(msgs, m)
	}
	r.Publish(queue, msgs...)
	return bodies
}

// recorder is a Go consumer that acks and keeps every delivery.
type recorder struct {
	mu sync.Mutex
	ds []amqp.Delivery
}

func (rc *recorder) handle(d amqp.Delivery) string {
	rc.mu.Lock()
	rc.ds = append(rc.ds, d)
	rc.mu.Unlock()
	return "ack"
}

func (rc *recorder) got() []amqp.Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]amqp.Delivery(nil), rc.ds...)
}

// sha is the hex SHA-256 of b, as the consumers log bodies.
func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
