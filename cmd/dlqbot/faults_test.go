package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// fixture is a DLQ of n dead letters from src, whose consumer records
// deliveries, with a preview token.
type fixture struct {
	env      map[string]string
	rabbit   *testkit.Rabbit
	st       *store.Store
	src, dlq string
	msgs     []amqp.Publishing
	token    string
	mu       chan struct{}
	got      map[string]int
	byMsgID  map[string]string // message_id → fingerprint id
}

func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	env := testEnv(t)
	rdb, err := store.Open(env["REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	st, err := store.New(store.Config{Prefix: env["DLQBOT_REDIS_PREFIX"], SigningKey: []byte(env["DLQBOT_SIGNING_KEY"])}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: env, rabbit: testkit.Dial(t), st: st, src: testkit.Name("src"), dlq: testkit.Name("dlq"),
		msgs: testkit.Msgs(n, 200), mu: make(chan struct{}, 1), got: map[string]int{}, byMsgID: map[string]string{}}
	f.rabbit.Topology(f.src, f.dlq, nil)
	f.rabbit.Reject(f.src, f.msgs...)
	f.rabbit.WaitCount(f.dlq, n, 30*time.Second)
	out, _, code := dlqbot(t, env, "preview", f.dlq, "--json")
	if code != 0 {
		t.Fatalf("preview: %s", out)
	}
	var p engine.Preview
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	f.token = p.Token
	for _, m := range p.Messages {
		f.byMsgID[m.MessageID] = m.ID
	}
	f.rabbit.Consume(f.src, func(d amqp.Delivery) string {
		f.mu <- struct{}{}
		f.got[d.MessageId]++
		<-f.mu
		return "ack"
	})
	return f
}

func (f *fixture) delivered() map[string]int {
	f.mu <- struct{}{}
	defer func() { <-f.mu }()
	out := map[string]int{}
	for k, v := range f.got {
		out[k] = v
	}
	return out
}

// deliveries is how many deliveries the consumer got, duplicates included.
func (f *fixture) deliveries() int {
	n := 0
	for _, c := range f.delivered() {
		n += c
	}
	return n
}

// waitDelivered polls until the consumer has had at least n deliveries.
func (f *fixture) waitDelivered(t testing.TB, n int) {
	t.Helper()
	testkit.Eventually(t, 20*time.Second, fmt.Sprintf("%d delivered", n), func() bool { return f.deliveries() >= n })
}

func (f *fixture) replayID(t testing.TB) string {
	t.Helper()
	var id string
	testkit.Eventually(t, 20*time.Second, "the replay to be created", func() bool {
		id, _ = f.st.Tokens().UsedBy(context.Background(), f.token)
		return id != ""
	})
	return id
}

// accountFor waits until every message is in the DLQ or was delivered,
// then checks that none is lost and every duplicate is in the replay's
// ledger, and returns the duplicates.
func (f *fixture) accountFor(t testing.TB, replayID string) map[string]int {
	t.Helper()
	total := func() int {
		return f.deliveries() + f.rabbit.Count(f.dlq)
	}
	testkit.Eventually(t, 30*time.Second, "every message in the DLQ or delivered", func() bool { return total() >= len(f.msgs) })
	left := f.rabbit.Drain(f.dlq, f.rabbit.Count(f.dlq), 10*time.Second) // by count: a pause is no end
	originals := make([]string, len(f.msgs))
	for i, m := range f.msgs {
		originals[i] = m.MessageId
	}
	inDLQ := map[string]int{}
	for _, d := range left {
		inDLQ[d.MessageId]++
	}
	lost, dups := testkit.NoneLost(originals, f.delivered(), inDLQ)
	if len(lost) > 0 {
		t.Fatalf("%s", testkit.Describe(lost, dups))
	}
	entries, err := f.st.Ledger().Entries(context.Background(), replayID)
	if err != nil {
		t.Fatal(err)
	}
	inLedger := map[string]bool{}
	for _, e := range entries {
		inLedger[e.ID] = true
	}
	for mid, n := range dups {
		if n > 1 || !inLedger[f.byMsgID[mid]] {
			t.Errorf("duplicate %s (%d extra) is not accounted for in the ledger", mid, n)
		}
	}
	return dups
}

func TestSIGKILLOfTheReplayingProcessLosesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	p := start(t, f.env, "replay", f.token, "step=1000", "cap=1000", "rate=400", "timeout=20s")
	id := f.replayID(t)
	f.waitDelivered(t, 200)
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done
	dups := f.accountFor(t, id)
	t.Logf("SIGKILL mid-replay: 0 lost, %d duplicate(s), all in the ledger", len(dups))
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestTwoServersOwnerKilledIsReportedInterrupted(t *testing.T) {
	t.Parallel()
	took, sent, dups := ownerKilled(t, "3s")
	if took > 3*time.Second+10*time.Second {
		t.Errorf("interrupted reported %s after the kill", took)
	}
	t.Logf("owner killed: interrupted reported after %s; sent %d; 0 lost; %d duplicate(s), all in the ledger", took.Round(100*time.Millisecond), sent, dups)
}

// BenchmarkInterruptReport measures, with the default 15 s lease, the time
// from SIGKILL of a replay's owner to the other server's interrupted report.
func BenchmarkInterruptReport(b *testing.B) {
	var sum time.Duration
	for i := 0; i < b.N; i++ {
		took, _, _ := ownerKilled(b, "")
		sum += took
	}
	b.ReportMetric(sum.Seconds()/float64(b.N), "s-to-interrupted")
}

// ownerKilled runs two servers, hands them a replay, SIGKILLs its owner
// and waits for the survivor to report it interrupted; it checks nothing
// was lost and returns how long the report took, what was sent and how
// many duplicates the ledger accounts for.
func ownerKilled(t testing.TB, lease string) (time.Duration, int, int) {
	f := newFixture(t, 600)
	env := f.env
	if lease != "" {
		env = merge(env, "DLQBOT_LEASE_TTL", lease)
	}
	a := start(t, merge(env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	b := start(t, merge(env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	testkit.Eventually(t, 20*time.Second, "both workers announced", func() bool {
		ws, _ := f.st.Workers().List(context.Background())
		return len(ws) == 2
	})
	// The terminal hands the replay to the workers and follows it.
	follower := start(t, env, "replay", f.token, "step=600", "cap=600", "rate=200", "timeout=20s", "--json")
	id := f.replayID(t)
	var owner string
	testkit.Eventually(t, 20*time.Second, "an owner", func() bool {
		owner, _ = f.st.Leases().Owner(context.Background(), id)
		return owner != ""
	})
	owner, _, _ = strings.Cut(owner, "/") // the lease names the worker and its run
	f.waitDelivered(t, 100)
	victim, survivor := a, b
	if b.Logged("worker", owner) != nil {
		victim, survivor = b, a
	} else if a.Logged("worker", owner) == nil {
		t.Fatalf("neither server logged worker %s", owner)
	}
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var rep engine.Replay
	testkit.Eventually(t, 30*time.Second, "the replay reported interrupted", func() bool {
		rep, _ = f.st.Replays().Get(context.Background(), id)
		return rep.State == engine.StateInterrupted
	})
	took := time.Since(killed)
	if !strings.Contains(rep.RestSelection, f.dlq) || strings.Contains(rep.Note, "/dlq") {
		t.Errorf("interrupted replay: rest selection %q (want the preview's, naming %s), note %q (want no slash command)", rep.RestSelection, f.dlq, rep.Note)
	}
	var line map[string]any
	testkit.Eventually(t, 10*time.Second, "the survivor's interruption report", func() bool {
		line = survivor.Logged("event", "interrupted")
		return line != nil
	})
	if msg, _ := line["message"].(string); !strings.Contains(msg, "sent") || rep.Sent == 0 {
		t.Errorf("interruption report %q does not list what was sent (sent %d)", msg, rep.Sent)
	}
	<-follower.Done
	if code := follower.Cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("follower exit %d, want 1 for an interrupted replay", code)
	}
	dups := f.accountFor(t, id)
	return took, rep.Sent, len(dups)
}

// TestSIGTERMPausesAndReleases stops a serve process with SIGTERM in the
// middle of a replay: it must finish its in-flight copies, release the
// lease and leave the replay paused (resumable), losing nothing.
func TestSIGTERMPausesAndReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 400)
	srv := start(t, merge(f.env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	testkit.Eventually(t, 20*time.Second, "the worker announced", func() bool {
		ws, _ := f.st.Workers().List(context.Background())
		return len(ws) == 1
	})
	follower := start(t, f.env, "replay", f.token, "step=400", "cap=400", "rate=100", "timeout=20s", "--json")
	id := f.replayID(t)
	f.waitDelivered(t, 50)
	if err := srv.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit within 20s of SIGTERM")
	}
	if code := srv.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve exit %d after SIGTERM, want 0", code)
	}
	rep, err := f.st.Replays().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.State != engine.StatePaused {
		t.Fatalf("state %s after SIGTERM, want paused (%s)", rep.State, rep.Note)
	}
	if owner, _ := f.st.Leases().Owner(context.Background(), id); owner != "" {
		t.Fatalf("lease still held by %s after SIGTERM", owner)
	}
	<-follower.Done
	dups := f.accountFor(t, id)
	if len(dups) != 0 {
		t.Errorf("a clean shutdown duplicated %d message(s)", len(dups))
	}
	entries, _ := f.st.Ledger().Entries(context.Background(), id)
	for _, e := range entries {
		if e.Pending {
			t.Errorf("ledger entry %s still pending after a clean shutdown", e.ID)
		}
	}
}
