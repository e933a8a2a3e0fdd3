package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	broker "github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/review"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

// The cluster runs need the three-node RabbitMQ 4.3 cluster of
// scripts/cluster.sh (chaos.sh starts it): dlqc1–3 on 5691–5693,
// management 15691–15693. The harness (its consumer, its counts) works
// through dlqc1, which the node-loss runs never kill; dlqbot is given the
// list dlqc2,dlqc3,dlqc1, so it connects through dlqc2.

// clusterNodes are the cluster's node names, in scripts/cluster.sh's order.
var clusterNodes = []string{"dlqc1", "dlqc2", "dlqc3"}

func nodeBroker(i int) testkit.Broker { // i: 1, 2 or 3
	return testkit.Broker{Name: clusterNodes[i-1],
		AMQPURL:       fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", 5690+i),
		ManagementURL: fmt.Sprintf("http://guest:guest@127.0.0.1:%d", 15690+i)}
}

// dlqbotNodes is the AMQP_URL and RABBITMQ_MANAGEMENT_URL dlqbot gets.
func dlqbotNodes() (amqpURL, mgmtURL string) {
	var a, m []string
	for _, i := range []int{2, 3, 1} {
		a, m = append(a, nodeBroker(i).AMQPURL), append(m, nodeBroker(i).ManagementURL)
	}
	return strings.Join(a, ","), strings.Join(m, ",")
}

// clusterGate skips t unless the chaos runs are on and the cluster answers.
func clusterGate(t *testing.T) {
	t.Helper()
	gate(t)
	for i := 1; i <= 3; i++ {
		if _, err := mgmtGet(i, "/api/overview"); err != nil {
			t.Skipf("the three-node cluster is not running (scripts/cluster.sh start): %s: %v", clusterNodes[i-1], err)
		}
	}
}

// cluster runs scripts/cluster.sh with args.
func cluster(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("../cluster.sh", args...).CombinedOutput()
	t.Logf("scripts/cluster.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("scripts/cluster.sh %s: %v", strings.Join(args, " "), err)
	}
}

// mgmtGet reads path from node i's management API.
func mgmtGet(i int, path string) ([]byte, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", 15690+i, path), nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return []byte(b.String()), nil
}

// leaderOf is the node ("dlqc3") leading quorum queue q, as dlqc1 reports it.
func leaderOf(t *testing.T, q string) string {
	t.Helper()
	var info struct {
		Leader string `json:"leader"`
		Node   string `json:"node"`
	}
	var err error
	testkit.Eventually(t, 30*time.Second, "the leader of "+q, func() bool {
		var b []byte
		if b, err = mgmtGet(1, "/api/queues/%2F/"+url.PathEscape(q)); err != nil {
			return false
		}
		return json.Unmarshal(b, &info) == nil && (info.Leader != "" || info.Node != "")
	})
	l := info.Leader
	if l == "" {
		l = info.Node
	}
	return strings.TrimSuffix(l, "@localhost")
}

// connectionNode is the node ("dlqc2") dlqbot's connection named name is
// on, "" when none is listed.
func connectionNode(name string) string {
	b, err := mgmtGet(1, "/api/connections?columns=node,client_properties")
	if err != nil {
		return ""
	}
	var cs []struct {
		Node  string `json:"node"`
		Props struct {
			Name string `json:"connection_name"`
		} `json:"client_properties"`
	}
	if json.Unmarshal(b, &cs) != nil {
		return ""
	}
	for _, c := range cs {
		if c.Props.Name == name {
			return strings.TrimSuffix(c.Node, "@localhost")
		}
	}
	return ""
}

// newClusterFixture is a fixture on the cluster: a quorum DLQ and a quorum
// source queue, each replicated on all three nodes, led by leader (the
// queues are declared through it: client-local); the harness and its
// consumer on the source work through dlqc1.
func newClusterFixture(t *testing.T, n int, leader int, extra map[string]string) *fixture {
	t.Helper()
	rdb, prefix := testkit.Redis(t)
	st, err := store.New(store.Config{Prefix: prefix}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := nodeBroker(1)
	b, err := broker.New(broker.Config{URL: h.AMQPURL, ManagementURL: h.ManagementURL, ConnectionName: "dlqbot-chaos-harness"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	svc, err := review.New(review.Config{}, review.Deps{Broker: b, Mover: b, Counters: b,
		Tokens: st.Tokens(), Ledger: st.Ledger(), Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Consumers: testkit.ConsumersOff{}, Watches: testkit.WatchesOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, Claims: testkit.ClaimsOff{}, TapGaps: testkit.TapOff{}})
	if err != nil {
		t.Fatal(err)
	}
	amqpURL, mgmtURL := dlqbotNodes()
	env := map[string]string{
		"DLQBOT_REDIS_PREFIX": prefix, "REDIS_URL": testkit.RedisURL, "AMQP_URL": amqpURL,
		"RABBITMQ_MANAGEMENT_URL": mgmtURL, "DLQBOT_LEASE_TTL": "5s",
		// The operator's direct mode, access control off.
		"DLQBOT_ACCESS": "open",
	}
	for k, v := range extra {
		env[k] = v
	}
	f := &fixture{env: env, on: h, rabbit: h.Dial(t), rdb: rdb, st: st, svc: svc,
		src: testkit.Name("src"), dlq: testkit.Name("dlq"), msgs: testkit.Msgs(n, 200),
		got: map[string]int{}, byMsgID: map[string]string{}}
	replicated := amqp.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 3, "x-queue-leader-locator": "client-local"}
	with := func(kv amqp.Table) amqp.Table {
		out := amqp.Table{}
		for k, v := range replicated {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	lr := nodeBroker(leader).Dial(t)
	lr.Queue(f.dlq, with(amqp.Table{"x-delivery-limit": 1000}))
	lr.Queue(f.src, with(amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f.dlq}))
	f.rabbit.Reject(f.src, f.msgs...)
	f.rabbit.WaitCount(f.dlq, n, 2*time.Minute)
	f.rabbit.Consume(f.src, func(d amqp.Delivery) string {
		f.mu.Lock()
		f.record(d)
		f.mu.Unlock()
		return "ack"
	})
	return f
}

// TestChaosClusterNodeLoss SIGKILLs a node of the three-node cluster in the
// middle of a replay of 5,000 dead letters from a quorum DLQ replicated on
// all three nodes, and starts it again 20 s later: the node dlqbot is
// connected through (dlqc2), and in a second run the DLQ's quorum leader
// (dlqc3, which dlqbot is not connected to); each during a paced replay
// (rate=250 step=100 cap=1000, as issue 21 measured) and an unpaced one
// (rate=max). The paced replay must reach the end of its plan in the same
// run; an unpaced one may stop and is resumed. Afterwards every message
// is at the consumer or in the DLQ, and the replay is finished only if
// every message was sent.
func TestChaosClusterNodeLoss(t *testing.T) {
	clusterGate(t)
	for _, c := range []struct {
		name         string
		victim       int // node index killed
		leader       int // node index leading the DLQ
		paced        bool
		victimIsConn bool
	}{
		{"connected-paced", 2, 1, true, true},
		{"connected-unpaced", 2, 1, false, true},
		{"leader-paced", 3, 3, true, false},
		{"leader-unpaced", 3, 3, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodeLoss(t, c.name, c.victim, c.leader, c.paced, c.victimIsConn)
		})
	}
}

func nodeLoss(t *testing.T, name string, victim, leader int, paced, victimIsConn bool) {
	const n = 5000
	conn := testkit.Name("chaos-cluster")
	f := newClusterFixture(t, n, leader, map[string]string{"DLQBOT_CONNECTION_NAME": conn})
	if got := leaderOf(t, f.dlq); got != clusterNodes[leader-1] {
		t.Fatalf("the DLQ is led by %s, want %s", got, clusterNodes[leader-1])
	}
	p := f.preview(t)
	args := []string{"replay", p.Token, "step=100", "cap=1000", "rate=250", "timeout=30s", "--json"}
	if !paced {
		args = []string{"replay", p.Token, "step=5000", "cap=5000", "rate=max", "timeout=30s", "--json"}
	}
	began := time.Now()
	runner := start(t, f.env, args...)
	id := f.replayOf(t, p.Token, runner)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	testkit.Eventually(t, time.Minute, "dlqbot's connection listed", func() bool { return connectionNode(conn) != "" })
	if got := connectionNode(conn); got != "dlqc2" {
		t.Fatalf("dlqbot connected through %s, want dlqc2 (the first of its list)", got)
	}
	at := 1000
	if !paced {
		at = 300
	}
	testkit.Eventually(t, 2*time.Minute, fmt.Sprintf("%d delivered", at), func() bool { return f.total() >= at || runner.Exited() })
	victimName := clusterNodes[victim-1]
	sentAtKill, deliveredAtKill := f.state(id).Sent, f.total()
	cluster(t, "kill", victimName)
	killedAt := time.Now()
	if !victimIsConn && leaderOf(t, f.dlq) == victimName {
		t.Logf("the DLQ is still reported led by %s right after the kill (the report lags)", victimName)
	}

	// Watch the record's note while the node is away; start it again 20 s
	// after the kill.
	var notes []string
	seen := map[string]bool{}
	restarted := false
	var r engine.Replay
	for time.Since(killedAt) < 8*time.Minute {
		r = f.state(id)
		if r.Note != "" && !seen[r.Note] {
			seen[r.Note] = true
			notes = append(notes, r.Note)
		}
		if !restarted && time.Since(killedAt) >= 20*time.Second {
			cluster(t, "start-node", victimName)
			restarted = true
		}
		if restarted && runner.Exited() {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling interval
	}
	if !restarted {
		cluster(t, "start-node", victimName)
	}
	if !runner.Exited() {
		t.Fatalf("the replay still runs 8 minutes after the kill: %s %s", r.State, r.Note)
	}
	<-runner.Done
	r = f.state(id)
	took := time.Since(began).Round(time.Second)
	t.Logf("%s: killed %s at %d sent, %d delivered; the replay ended %s after %s: sent %d of %d, duplicates %d, in doubt %d, missing %d: %s",
		name, victimName, sentAtKill, deliveredAtKill, r.State, took, r.Sent, r.Total, r.Duplicates, r.InDoubt, r.Missing, r.Note)
	for _, nt := range notes {
		t.Logf("  note seen: %s", nt)
	}
	waited := false
	for _, nt := range notes {
		if strings.Contains(nt, "waiting for") || strings.Contains(nt, "reconnecting") {
			waited = true
		}
	}
	ids := []string{id}
	outcome := string(r.State)
	if paced {
		// The same run went on and finished: its copies in doubt sent
		// again (marked), nothing missing, nothing left planned.
		if r.State != engine.StateFinished || r.Sent != r.Total || r.InDoubt != 0 {
			t.Errorf("the paced replay did not finish in the same run: %s, sent %d, in doubt %d, resent %d of %d: %s", r.State, r.Sent, r.InDoubt, r.Resent, r.Total, r.Note)
		}
		if victimIsConn && !waited {
			t.Errorf("the paced replay never said it waited after losing %s (notes %q)", victimName, notes)
		}
	} else if r.State == engine.StateStopped || r.State == engine.StatePaused {
		// An unpaced replay may stop: resume it once the cluster is whole.
		// What it says is left is in the DLQ.
		outcome += fmt.Sprintf(" (%d sent, %d duplicates, %d in doubt; the DLQ held %d)", r.Sent, r.Duplicates, r.InDoubt, expectHeld(t, f, r))
		out, errOut, code := cli(t, f.env, "resume", id, "--json")
		var rr engine.Replay
		_ = json.Unmarshal([]byte(out), &rr)
		t.Logf("resumed: exit %d, %s: sent %d, duplicates %d, in doubt %d: %s %s", code, rr.State, rr.Sent, rr.Duplicates, rr.InDoubt, rr.Note, tail(errOut, 400))
		r = f.state(id)
		outcome += " → resumed: " + string(r.State)
		if r.State == engine.StateStopped && r.InDoubt > 0 {
			outcome += fmt.Sprintf(" (%d sent, %d in doubt; the DLQ held %d)", r.Sent, r.InDoubt, expectHeld(t, f, r))
			// The explicit action finishes it.
			out, errOut, code = cli(t, f.env, "resume", id, "resend=in-doubt", "--json")
			rr = engine.Replay{}
			_ = json.Unmarshal([]byte(out), &rr)
			t.Logf("resend=in-doubt: exit %d, %s: sent %d, resent %d, in doubt %d: %s %s", code, rr.State, rr.Sent, rr.Resent, rr.InDoubt, rr.Note, tail(errOut, 400))
			r = f.state(id)
			outcome += " → resend=in-doubt: " + string(r.State)
			if r.State != engine.StateFinished {
				t.Errorf("resend=in-doubt did not finish the replay: %s: %s", r.State, r.Note)
			}
		}
	}
	if r.State == engine.StateFinished && r.Sent != r.Total {
		t.Errorf("finished with %d of %d sent", r.Sent, r.Total)
	}
	// Re-dial the harness: its node was never killed, but be sure.
	a := f.accountFor(t, ids)
	if len(a.Lost) > 0 {
		t.Errorf("%s: lost %d: %v", name, len(a.Lost), a.Lost[:min(10, len(a.Lost))])
	}
	if r.State == engine.StateFinished && a.Deliveries-a.ExtraDeliveries != n {
		t.Errorf("finished, but only %d of %d messages reached the consumer", a.Deliveries-a.ExtraDeliveries, n)
	}
	expectCounted(t, r, a)
	figure(t, "cluster_"+strings.ReplaceAll(name, "-", "_"),
		"RabbitMQ 4.3.6 three-node cluster, quorum DLQ and source on all three; %s SIGKILLed at %d delivered, started 20 s later; replay %s in %s: %d lost; broker holds %d twice (%d in doubt), consumer got %d extra deliveries; reported %d duplicates + %d in doubt, %d resent; %d of %d sent; %s",
		victimName, deliveredAtKill, outcome, took, len(a.Lost), a.HeldTwice, a.HeldTwicePending, a.ExtraDeliveries, r.Duplicates, r.InDoubt, r.Resent, r.Sent, r.Total, a)
}

// TestChaosClusterRollingRestart restarts the three nodes one after the
// other (rabbitmqctl stop, start, wait until it answers, as an upgrade does) during a paced replay
// of DLQBOT_CHAOS_ROLLING_N dead letters (default 20,000) from a quorum
// DLQ replicated on all three. The harness's consumer reconnects too (its
// redeliveries are not counted as copies). The replay must reach the end
// of its plan in the same run, nothing lost.
func TestChaosClusterRollingRestart(t *testing.T) {
	clusterGate(t)
	n := 20000
	if v := os.Getenv("DLQBOT_CHAOS_ROLLING_N"); v != "" {
		fmt.Sscan(v, &n)
	}
	conn := testkit.Name("chaos-rolling")
	f := newClusterFixture(t, n, 1, map[string]string{"DLQBOT_CONNECTION_NAME": conn})
	// The consumer on dlqc1 goes away with its node: consume through a
	// reconnecting one instead (counting a redelivery of an id it already
	// has as the same copy).
	f.rabbit.Conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reconnectingConsumer(ctx, f)
	p := f.preview(t)
	began := time.Now()
	runner := start(t, f.env, "replay", p.Token, "step=1000", "cap=2000", "rate=500", "timeout=60s", "--json")
	id := f.replayOf(t, p.Token, runner)
	if id == "" {
		t.Fatal("the replay was not approved")
	}
	testkit.Eventually(t, 2*time.Minute, "1,000 delivered", func() bool { return f.total() >= 1000 || runner.Exited() })
	var restarts []string
	for _, node := range []string{"dlqc3", "dlqc2", "dlqc1"} {
		if runner.Exited() {
			restarts = append(restarts, node+": not restarted (the replay had ended)")
			continue
		}
		at := f.total()
		cluster(t, "stop-node", node)  // graceful, as an upgrade does
		cluster(t, "start-node", node) // waits until it answers
		restarts = append(restarts, fmt.Sprintf("%s at %d delivered", node, at))
		testkit.Eventually(t, 2*time.Minute, "deliveries going on after "+node, func() bool { return f.total() > at || runner.Exited() })
	}
	select {
	case <-runner.Done:
	case <-time.After(15 * time.Minute):
		t.Fatal("the replay did not end within 15 minutes")
	}
	took := time.Since(began).Round(time.Second)
	r := f.state(id)
	t.Logf("rolling restart (%s): %s after %s: sent %d of %d, duplicates %d, in doubt %d, missing %d: %s", strings.Join(restarts, ", "), r.State, took, r.Sent, r.Total, r.Duplicates, r.InDoubt, r.Missing, r.Note)
	if r.State != engine.StateFinished || r.Sent != r.Total || r.InDoubt != 0 {
		t.Errorf("the paced replay did not finish in the same run: %s, sent %d, in doubt %d, resent %d: %s", r.State, r.Sent, r.InDoubt, r.Resent, r.Note)
	}
	f.rabbit = f.on.Dial(t)
	a := f.accountFor(t, []string{id})
	if len(a.Lost) > 0 {
		t.Errorf("lost %d: %v", len(a.Lost), a.Lost[:min(10, len(a.Lost))])
	}
	expectCounted(t, r, a)
	figure(t, "cluster_rolling_restart",
		"RabbitMQ 4.3.6 three-node cluster, paced replay (rate=500 step=1000 cap=2000) of %d; each node stopped and started again in turn (%s); replay %s in %s: %d lost; broker holds %d twice (%d in doubt), consumer got %d extra deliveries; reported %d duplicates + %d in doubt, %d resent; %d of %d sent",
		n, strings.Join(restarts, ", "), r.State, took, len(a.Lost), a.HeldTwice, a.HeldTwicePending, a.ExtraDeliveries, r.Duplicates, r.InDoubt, r.Resent, r.Sent, r.Total)
}

// reconnectingConsumer consumes f.src through any live node until ctx
// ends, recording each message id in f.got; a redelivery of an id already
// recorded (the consumer's own connection was lost before its ack) is not
// a new copy.
func reconnectingConsumer(ctx context.Context, f *fixture) {
	var mu sync.Mutex
	acked := map[string]bool{}
	for i := 0; ctx.Err() == nil; i++ {
		nb := nodeBroker(1 + i%3)
		conn, err := amqp.Dial(nb.AMQPURL)
		if err != nil {
			time.Sleep(500 * time.Millisecond) // next node
			continue
		}
		ch, err := conn.Channel()
		if err == nil {
			err = ch.Qos(50, 0, false)
		}
		var ds <-chan amqp.Delivery
		if err == nil {
			ds, err = ch.Consume(f.src, "", false, false, false, false, nil)
		}
		if err != nil {
			conn.Close()
			time.Sleep(500 * time.Millisecond)
			continue
		}
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case d, ok := <-ds:
				if !ok {
					break loop
				}
				mu.Lock()
				again := d.Redelivered && acked[d.MessageId]
				acked[d.MessageId] = true
				mu.Unlock()
				if !again {
					f.mu.Lock()
					f.record(d)
					f.mu.Unlock()
				}
				_ = d.Ack(false)
			}
		}
		conn.Close()
	}
}

// expectCounted checks a replay's counts against what the broker holds
// (accountFor), each equal to the broker's own: missing is what is
// neither at the consumer nor in the DLQ; sent (confirmed copies) is what
// reached the consumer less the copies in doubt that arrived; in doubt is
// the originals in the DLQ whose ledger entry is pending (their copies
// maybe delivered); the duplicates are the originals in the DLQ whose
// messages were also delivered, where their copies were confirmed, and
// the rest of what the broker holds twice is within the copies in doubt.
// Every extra delivery is a copy in doubt sent again (resent, marked
// x-dlqbot-possible-duplicate) or a copy the consumer's own lost
// connection redelivered (not counted by the reconnecting consumer).
func expectCounted(t *testing.T, r engine.Replay, a account) {
	t.Helper()
	if r.Missing != len(a.Lost) {
		t.Errorf("the replay reports %d missing; %d are neither at the consumer nor in the DLQ", r.Missing, len(a.Lost))
	}
	if sent := a.Distinct - a.HeldTwicePending; sent != r.Sent {
		t.Errorf("the replay reports %d sent; the consumer got %d messages, %d of them copies in doubt: %d confirmed", r.Sent, a.Distinct, a.HeldTwicePending, sent)
	}
	if a.PendingInDLQ != r.InDoubt {
		t.Errorf("the replay reports %d in doubt; the DLQ holds %d originals whose copies are pending", r.InDoubt, a.PendingInDLQ)
	}
	if confirmed := a.HeldTwice - a.HeldTwicePending; confirmed != r.Duplicates || a.HeldTwicePending > r.InDoubt {
		t.Errorf("the broker holds %d message(s) twice (%d of them in doubt); the replay reports %d duplicates and %d in doubt: want the duplicates exact and the rest in doubt",
			a.HeldTwice, a.HeldTwicePending, r.Duplicates, r.InDoubt)
	}
	if a.ExtraDeliveries > r.Resent {
		t.Errorf("the consumer got %d extra deliveries, but only %d copies in doubt were sent again", a.ExtraDeliveries, r.Resent)
	}
}

// expectHeld checks, without reading it, that the DLQ holds what a
// stopped replay says is left there: the originals not sent yet and
// those of the copies in doubt (Total − Sent), plus the duplicates (their
// copies confirmed, their originals back). It returns what the DLQ holds.
func expectHeld(t *testing.T, f *fixture, r engine.Replay) int {
	t.Helper()
	f.settled(t)
	want := r.Total - r.Sent + r.Duplicates
	got := -1
	for deadline := time.Now().Add(30 * time.Second); got != want && time.Now().Before(deadline); {
		if got >= 0 {
			time.Sleep(100 * time.Millisecond) // polling interval: the count of a quorum queue settles
		}
		got = f.rabbit.Count(f.dlq)
	}
	if got != want {
		t.Errorf("stopped with %d of %d sent and %d duplicates: the DLQ should hold %d, it holds %d", r.Sent, r.Total, r.Duplicates, want, got)
	}
	return got
}
