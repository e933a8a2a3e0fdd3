package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/review"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// fixture is a DLQ of n messages dead-lettered from src by the broker, a
// healthy consumer on src that records every delivery, and the Redis store
// the dlqbot processes share.
type fixture struct {
	env      map[string]string
	on       testkit.Broker // the broker the DLQ is on
	rabbit   *testkit.Rabbit
	rdb      redis.UniversalClient
	st       *store.Store
	svc      *review.Service // this harness's engine: reaps, like any replica
	src, dlq string
	msgs     []amqp.Publishing
	mu       sync.Mutex
	got      map[string]int // message_id → deliveries
	// marked counts the deliveries that carried
	// x-dlqbot-possible-duplicate: true (a copy in doubt sent again, which
	// stands in the ledger entry of the copy that may have arrived).
	marked  map[string]int
	byMsgID map[string]string // message_id → fingerprint id
}

// record counts one delivery to the target (f.mu held by the caller).
func (f *fixture) record(d amqp.Delivery) {
	f.got[d.MessageId]++
	if d.Headers[engine.PossibleDuplicateHeader] == true {
		if f.marked == nil {
			f.marked = map[string]int{}
		}
		f.marked[d.MessageId]++
	}
}

// newFixture builds a fixture of n messages on RabbitMQ 3.10, with a
// classic DLQ. redisURL "" means the test Redis (with a unique prefix,
// cleaned up); extra is added to the dlqbot processes' environment.
func newFixture(t *testing.T, n int, redisURL string, extra map[string]string) *fixture {
	t.Helper()
	return newFixtureOn(t, classic3, n, redisURL, extra)
}

// target is a broker and a kind of DLQ a chaos run runs against.
type target struct {
	// name names the subtest and suffixes the run's figures ("" for
	// RabbitMQ 3.10 with a classic DLQ, the runs' first target).
	name    string
	on      testkit.Broker
	dlqArgs amqp.Table
}

// classic3 is RabbitMQ 3.10 with a classic DLQ; quorum4 is RabbitMQ 4.0
// with a quorum DLQ. 4.0 counts every give-back of a read against a quorum
// queue's delivery limit (its default is 20), and these runs read the DLQ
// dozens (the readers run: hundreds) of times, so the DLQ has a limit of
// 1,000: the runs test faults, readers and control, every read still
// budgeted; the engine tests cover the budget at 4.0's default.
var (
	classic3 = target{name: "rabbit3-classic", on: testkit.Rabbit3}
	quorum4  = target{name: "rabbit4-quorum", on: testkit.Rabbit4, dlqArgs: testkit.Quorum(amqp.Table{"x-delivery-limit": 1000})}
)

// targets are the targets of the runs that run on both brokers.
var targets = []target{classic3, quorum4}

// figureName is name for RabbitMQ 3.10's classic DLQ (as before 4.0 was
// tested) and name_<target> for the others.
func (tg target) figureName(name string) string {
	if tg.name == classic3.name {
		return name
	}
	return name + "_" + strings.ReplaceAll(tg.name, "-", "_")
}

// eachTarget runs f as one subtest per target, in turn.
func eachTarget(t *testing.T, f func(t *testing.T, tg target)) {
	t.Helper()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			tg.on.Require(t)
			f(t, tg)
		})
	}
}

// newFixtureOn is newFixture on tg's broker, with tg's kind of DLQ.
func newFixtureOn(t *testing.T, tg target, n int, redisURL string, extra map[string]string) *fixture {
	t.Helper()
	var rdb redis.UniversalClient
	var prefix string
	if redisURL == "" {
		redisURL = testkit.RedisURL
		rdb, prefix = testkit.Redis(t)
	} else {
		var err error
		if rdb, err = store.Open(redisURL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		prefix = testkit.Name("chaos") + ":"
	}
	st, err := store.New(store.Config{Prefix: prefix, SigningKey: []byte(chaosSigningKey)}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Config{URL: tg.on.AMQPURL, ManagementURL: tg.on.ManagementURL, ConnectionName: "dlqbot-chaos-harness"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	svc, err := review.New(review.Config{}, review.Deps{Broker: b, Mover: b, Counters: b,
		Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DLQBOT_REDIS_PREFIX": prefix, "REDIS_URL": redisURL, "AMQP_URL": tg.on.AMQPURL,
		"RABBITMQ_MANAGEMENT_URL": tg.on.ManagementURL, "DLQBOT_LEASE_TTL": "2s",
		"DLQBOT_SIGNING_KEY": chaosSigningKey,
		// The operator's direct mode, access control off.
		"DLQBOT_ACCESS": "open",
	}
	for k, v := range extra {
		env[k] = v
	}
	f := &fixture{env: env, on: tg.on, rabbit: tg.on.Dial(t), rdb: rdb, st: st, svc: svc,
		src: testkit.Name("src"), dlq: testkit.Name("dlq"), msgs: testkit.Msgs(n, 200),
		got: map[string]int{}, byMsgID: map[string]string{}}
	f.rabbit.Topology(f.src, f.dlq, tg.dlqArgs)
	f.rabbit.Reject(f.src, f.msgs...)
	f.rabbit.WaitCount(f.dlq, n, time.Minute)
	f.rabbit.Consume(f.src, func(d amqp.Delivery) string {
		f.mu.Lock()
		f.record(d)
		f.mu.Unlock()
		return "ack"
	})
	return f
}

// with returns the fixture's environment plus k=v pairs.
func (f *fixture) with(kv ...string) map[string]string {
	out := make(map[string]string, len(f.env)+len(kv)/2)
	for k, v := range f.env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// delivered is a copy of the deliveries so far.
func (f *fixture) delivered() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.got))
	for k, v := range f.got {
		out[k] = v
	}
	return out
}

// total is how many deliveries the consumer received, duplicates included.
func (f *fixture) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.got {
		n += c
	}
	return n
}

// preview runs `dlqbot preview <dlq> --json` and returns the preview; its
// Token is "" when nothing is left to replay.
func (f *fixture) preview(t *testing.T, extra ...string) *engine.Preview {
	t.Helper()
	out, errOut, code := cli(t, f.env, append([]string{"preview", f.dlq, "--json"}, extra...)...)
	if code != 0 {
		t.Fatalf("dlqbot preview exit %d:\n%s\n%s", code, out, errOut)
	}
	var p engine.Preview
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("preview JSON: %v\n%s", err, out)
	}
	for _, m := range p.Messages {
		if m.MessageID != "" {
			f.byMsgID[m.MessageID] = m.ID
		}
	}
	return &p
}

// replayOf waits for token to be consumed by a replay and returns its id;
// "" when p exited first (its output is logged).
func (f *fixture) replayOf(t *testing.T, token string, p *testkit.Proc) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if id, _ := f.st.Tokens().UsedBy(context.Background(), token); id != "" {
			return id
		}
		if p != nil && p.Exited() {
			t.Logf("dlqbot replay exited before approving %s:\n%s", token, p.Output())
			return ""
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	t.Fatalf("token %s was not consumed within a minute", token)
	return ""
}

// state returns replay id's state, "" when its record is gone.
func (f *fixture) state(id string) engine.Replay {
	r, err := f.st.Replays().Get(context.Background(), id)
	if err != nil {
		return engine.Replay{ID: id}
	}
	return r
}

// dlqConsumers returns how many consumers the DLQ has (a dead process's
// reads are returned to the queue when its consumer is gone).
func (f *fixture) dlqConsumers(t *testing.T) int {
	t.Helper()
	ch, err := f.rabbit.Conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(f.dlq, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Consumers
}

// settled waits until nothing holds DLQ messages unacked.
func (f *fixture) settled(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the DLQ to have no consumer", func() bool { return f.dlqConsumers(t) == 0 })
}

// reap waits until the harness's reaper (any replica's, in production) has
// reported replay id interrupted, or the replay is in another state than
// running; it returns the record.
func (f *fixture) reap(t *testing.T, id string) engine.Replay {
	t.Helper()
	var r engine.Replay
	testkit.Eventually(t, 30*time.Second, "replay "+id+" reported", func() bool {
		_, _ = f.svc.ReapOnce(context.Background())
		r = f.state(id)
		return r.State != engine.StateRunning
	})
	return r
}

// finish previews everything left in the DLQ (parked messages included)
// and replays it to the end with `dlqbot replay`, until nothing is left; it
// returns the ids of the replays it ran.
func (f *fixture) finish(t *testing.T) []string {
	t.Helper()
	var ids []string
	for range 5 {
		p := f.preview(t, "include_parked=true")
		if p.Token == "" {
			return ids
		}
		out, errOut, code := cli(t, f.env, "replay", p.Token, "step=1000", "cap=1000", "rate=max", "timeout=20s", "--json")
		var r engine.Replay
		_ = json.Unmarshal([]byte(out), &r)
		if r.ID != "" {
			ids = append(ids, r.ID)
		}
		if code == 0 && r.State == engine.StateFinished {
			f.settled(t)
			continue
		}
		t.Errorf("finishing replay exit %d (%s): %s\n%s\n%s", code, r.State, r.Note, out, errOut)
		f.settled(t)
	}
	t.Errorf("messages still replayable after 5 finishing replays")
	return ids
}

// account is what became of every message of a fixture.
type account struct {
	Messages   int // originals
	Deliveries int // deliveries to the target, duplicates included
	InDLQ      int // left in the DLQ (parked or never replayed)
	Lost       []string
	// DupMessages were delivered more than once; DupCopies counts the
	// extra deliveries.
	DupMessages, DupCopies int
	// Unaccounted counts deliveries that no ledger entry of the replays
	// stands for (a message delivered more often than the ledgers list it).
	Unaccounted int
	// Pending is how many ledger entries stayed pending (intents never
	// confirmed: published or not when the run ended abruptly).
	Pending int
	// Duplicates by what the ledgers say of their message: DupPending have
	// a pending entry (a copy in flight when the run ended: in doubt),
	// DupConfirmed only confirmed entries (a copy confirmed and recorded
	// whose original could not be acked), DupUnrecorded too few entries to
	// stand for every copy.
	DupPending, DupConfirmed, DupUnrecorded int
	// LedgerEntries is how many entries the replays' ledgers hold.
	LedgerEntries int
	// HeldTwice counts the originals left in the DLQ whose message was
	// also delivered (the broker holds it twice); HeldTwicePending those
	// of them with a pending ledger entry (in doubt). ExtraDeliveries
	// counts deliveries beyond the first of each message.
	HeldTwice, HeldTwicePending, ExtraDeliveries int
	// Distinct is how many messages reached the consumer at least once;
	// PendingInDLQ counts the originals left in the DLQ whose ledger entry
	// is pending (the copies in doubt, as the broker shows them: each
	// original still there, its copy delivered or not).
	Distinct, PendingInDLQ int
}

// accountFor waits until every message is in the DLQ or was delivered,
// drains the DLQ and compares deliveries with the ledgers of replays.
func (f *fixture) accountFor(t *testing.T, replays []string) account {
	t.Helper()
	n := len(f.msgs)
	f.settled(t)
	testkit.Eventually(t, time.Minute, "every message in the DLQ or delivered", func() bool {
		return len(f.delivered())+f.rabbit.Count(f.dlq) >= n
	})
	left := f.rabbit.Drain(f.dlq, f.rabbit.Count(f.dlq), 10*time.Second) // by count: a pause is no end
	inDLQ := map[string]int{}
	for _, d := range left {
		inDLQ[d.MessageId]++
	}
	originals := make([]string, n)
	for i, m := range f.msgs {
		originals[i] = m.MessageId
	}
	// Deliveries of copies published just before a fault may still be on
	// their way: give the consumer until nothing more arrives.
	last, stable := -1, 0
	testkit.Eventually(t, 30*time.Second, "deliveries to stop changing", func() bool {
		cur := f.total()
		if cur == last {
			stable++
		} else {
			last, stable = cur, 0
		}
		return stable >= 25 // 25 polls of 20 ms: half a second without a delivery
	})
	got := f.delivered()
	f.mu.Lock()
	marked := maps.Clone(f.marked)
	f.mu.Unlock()
	lost, dups := testkit.NoneLost(originals, got, inDLQ)
	a := account{Messages: n, InDLQ: len(left), Lost: lost, DupMessages: len(dups)}
	for _, c := range got {
		a.Deliveries += c
	}
	for _, c := range dups {
		a.DupCopies += c
	}
	entries := map[string]int{} // fingerprint → ledger entries over all replays
	pending := map[string]int{} // fingerprint → pending entries
	for _, id := range replays {
		es, err := f.st.Ledger().Entries(context.Background(), id)
		if err != nil {
			t.Errorf("ledger of %s: %v", id, err)
			continue
		}
		for _, e := range es {
			entries[e.ID]++
			a.LedgerEntries++
			if e.Pending {
				a.Pending++
				pending[e.ID]++
			}
		}
	}
	for mid, extra := range dups {
		fp, ok := f.byMsgID[mid]
		listed, pend := entries[fp], pending[fp]
		// Every delivery needs an entry, and so does every copy beyond one
		// (an original left in the DLQ after its copy was sent counts).
		switch d := got[mid]; {
		case !ok || d > listed+marked[mid] || d+inDLQ[mid] > listed+1+marked[mid]:
			a.DupUnrecorded += extra
		case pend > 0:
			a.DupPending += extra
		default:
			a.DupConfirmed += extra
		}
	}
	a.Distinct = len(got)
	for mid, c := range inDLQ {
		if pending[f.byMsgID[mid]] > 0 {
			a.PendingInDLQ += c
		}
		if got[mid] == 0 {
			continue
		}
		a.HeldTwice += c
		if pending[f.byMsgID[mid]] > 0 {
			a.HeldTwicePending += c
		}
	}
	for _, c := range got {
		a.ExtraDeliveries += max(0, c-1)
	}
	for mid, c := range got {
		listed := 0
		if fp, ok := f.byMsgID[mid]; ok {
			listed = entries[fp]
		}
		if c > listed+marked[mid] {
			a.Unaccounted += c - listed - marked[mid]
		}
	}
	return a
}

func (a account) String() string {
	return fmt.Sprintf("%d messages: %d lost, %d delivered, %d duplicate copies of %d messages (%d with a pending ledger entry, %d with a confirmed entry whose original was not acked, %d not in any ledger), %d left in the DLQ (%d of them delivered too, %d of those in doubt), %d extra deliveries; ledgers: %d entries (%d pending), %d deliveries without a ledger entry",
		a.Messages, len(a.Lost), a.Deliveries, a.DupCopies, a.DupMessages, a.DupPending, a.DupConfirmed, a.DupUnrecorded, a.InDLQ, a.HeldTwice, a.HeldTwicePending, a.ExtraDeliveries, a.LedgerEntries, a.Pending, a.Unaccounted)
}

// freeAddr returns a free loopback address for a server's HTTP listener.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// readyz returns the HTTP status of a server's /readyz (0 when it does not
// answer).
func readyz(addr string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// workers waits until n workers announced themselves in the fixture's
// store.
func (f *fixture) workers(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%d worker(s) announced", n), func() bool {
		ws, _ := f.st.Workers().List(context.Background())
		return len(ws) == n
	})
}

// sortedPoints returns k distinct random integers in [1, n-1], ascending.
func sortedPoints(next func(int) int, k, n int) []int {
	seen := map[int]bool{}
	for len(seen) < k {
		seen[1+next(n-1)] = true
	}
	out := make([]int, 0, k)
	for p := range seen {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// chaosSigningKey signs the records of the harness and of every dlqbot it runs.
const chaosSigningKey = "chaos-signing-key-0123456789abcdef0123"
