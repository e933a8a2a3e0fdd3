package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/demo"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestDemoTrafficFinishesOneSourceAndStopsTheOther runs the demo's seeded
// DLQ and consumers through the terminal front end: replaying the orders
// finishes; the whole DLQ's preview shows the deploy's burst and the XTS
// failures still arriving; replaying the payments' EUR group alone
// finishes; replaying the rest of the payments stops on the currency it
// still rejects, and check groups what came back.
func TestDemoTrafficFinishesOneSourceAndStopsTheOther(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	q := demo.NewQueues(testkit.Name("demo"))
	for _, name := range []string{q.DLQ, q.Orders, q.Payments, q.DLQ + ".parking"} {
		t.Cleanup(func() { testkit.DeleteQueue(name) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := demo.StartTraffic(ctx, env["AMQP_URL"], q); err != nil {
		t.Fatal(err)
	}
	r := testkit.Dial(t)
	r.WaitCount(q.DLQ, 80, 20*time.Second)

	// When they failed: a burst after the deploy, XTS failures still
	// arriving, Spring's without a failure time counted apart.
	out, _, code := dlqbot(t, env, "preview", q.DLQ, "--json")
	if code != 0 {
		t.Fatalf("preview: %s", out)
	}
	var whole struct {
		Arrivals engine.Arrivals `json:"arrivals"`
	}
	if err := json.Unmarshal([]byte(out), &whole); err != nil {
		t.Fatal(err)
	}
	a := whole.Arrivals
	groups := map[string]engine.ArrivalRow{}
	for _, g := range a.Groups {
		groups[g.Key] = g
	}
	xts, rejected := groups["System.NotSupportedException: Currency XTS is not supported"], groups["rejected"]
	if a.Undated != 5 || !a.StillArriving() || !xts.StillArriving() || rejected.StillArriving() || rejected.Messages != 65 ||
		a.Bucket != 5*time.Minute || a.First.After(time.Now().Add(-demo.DeployAgo+2*time.Minute)) {
		t.Fatalf("arrivals of the demo DLQ: %+v", a)
	}

	out, _, code = dlqbot(t, env, "preview", q.DLQ, "source="+q.Orders, "--json")
	if code != 0 {
		t.Fatalf("preview orders: %s", out)
	}
	doc := oneJSON(t, out)
	if doc["selected"].(float64) != 50 {
		t.Fatalf("orders selected %v, want 45 rejected + 5 Spring failures", doc["selected"])
	}
	out, _, code = dlqbot(t, env, "replay", doc["token"].(string), "rate=max", "timeout=30s", "--json")
	if code != 0 || oneJSON(t, out)["state"] != string(engine.StateFinished) {
		t.Fatalf("orders replay exit %d: %s", code, out)
	}

	text, _, _ := dlqbot(t, env, "preview", q.DLQ, "source="+q.Payments)
	t.Logf("the payments' preview:\n%s", text)
	if !strings.Contains(text, "By failure group:") || !strings.Contains(text, rejected.GroupID) || !strings.Contains(text, "STILL ARRIVING") {
		t.Fatalf("text preview without the groups' arrivals:\n%s", text)
	}
	// The EUR part the fix covers, alone: it finishes.
	out, _, _ = dlqbot(t, env, "preview", q.DLQ, "source="+q.Payments, "group="+rejected.GroupID, "--json")
	doc = oneJSON(t, out)
	if doc["selected"].(float64) != 20 {
		t.Fatalf("payments' rejected group: %v selected, want 20", doc["selected"])
	}
	out, _, code = dlqbot(t, env, "replay", doc["token"].(string), "rate=max", "timeout=30s", "--json")
	if code != 0 || oneJSON(t, out)["state"] != string(engine.StateFinished) {
		t.Fatalf("EUR replay exit %d: %s", code, out)
	}

	out, _, _ = dlqbot(t, env, "preview", q.DLQ, "source="+q.Payments, "--json")
	token := oneJSON(t, out)["token"].(string)
	out, _, code = dlqbot(t, env, "replay", token, "rate=max", "timeout=30s", "--json")
	doc = oneJSON(t, out)
	if code != 1 || doc["state"] != string(engine.StateStopped) || doc["returned"].(float64) == 0 {
		t.Fatalf("payments replay exit %d: %s", code, out)
	}
	out, _, code = dlqbot(t, env, "check", doc["replay_id"].(string), "--json")
	c := oneJSON(t, out)
	if code != 0 || c["returned"].(float64) == 0 || len(c["groups"].([]any)) != 1 {
		t.Fatalf("check exit %d: %s", code, out)
	}
}

// TestDemoCommandServesThePage runs `dlqbot demo` in-process: it prints
// exactly one URL on stdout, serves the stand-in's page there, answers a
// command typed on the page through the bot, and stops cleanly when its
// context ends.
func TestDemoCommandServesThePage(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	prefix := testkit.Name("demo")
	q := demo.NewQueues(prefix)
	for _, name := range []string{q.DLQ, q.Orders, q.Payments, q.DLQ + ".parking"} {
		t.Cleanup(func() { testkit.DeleteQueue(name) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--addr", "127.0.0.1:0", "--queues", prefix}, &stdout, &stderr,
			func(k string) string { return env[k] })
	}()

	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasSuffix(stdout.String(), "\n") {
		select {
		case err := <-done:
			t.Fatalf("dlqbot demo ended early (%v):\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond): // polling interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL on stdout after 30s:\n%s", stderr.String())
		}
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 1 || !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(lines[0]) {
		t.Fatalf("stdout %q, want one URL", stdout.String())
	}
	url := lines[0]
	if body := httpGet(t, url+"/"); !strings.Contains(body, "<title>dlqbot") {
		t.Fatalf("GET / served %.200q", body)
	}
	// The demo has no permissions file, and its sign-in page says where
	// its token is instead.
	if body := httpGet(t, url+"/dashboard/signin"); strings.Contains(body, "permissions file") || !strings.Contains(body, "sign in with the token demo-") {
		t.Errorf("the demo's sign-in page: %s", body)
	}
	resp, err := http.Post(url+"/ui/command", "application/json",
		strings.NewReader(`{"channel":"`+demo.Channel+`","text":"/dlq help"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	testkit.Eventually(t, 10*time.Second, "the bot's help on the page", func() bool {
		return strings.Contains(httpGet(t, url+"/ui/state"), `"kind":"ephemeral"`) &&
			strings.Contains(httpGet(t, url+"/ui/state"), "preview")
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dlqbot demo stopped with %v:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dlqbot demo did not stop within 30s of its context ending")
	}
	if got := stdout.String(); got != url+"\n" {
		t.Fatalf("stdout %q, want only the URL", got)
	}
}

// TestDemoCommandSaysWhatIsMissing checks that `dlqbot demo` exits 1 and
// says what to start when RabbitMQ does not answer, and what to do when
// the page's address is taken.
func TestDemoCommandSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["AMQP_URL"] = "amqp://guest:guest@127.0.0.1:1/"
	out, errOut, code := dlqbot(t, env, "demo", "--addr", "127.0.0.1:0", "--queues", testkit.Name("demo"))
	if code != 1 || out != "" || !strings.Contains(errOut, "RabbitMQ is not reachable at amqp://guest:xxxxx@127.0.0.1:1/") ||
		!strings.Contains(errOut, "rabbitmq-server -detached") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	env = testEnv(t)
	out, errOut, code = dlqbot(t, env, "demo", "--addr", taken.Addr().String(), "--queues", testkit.Name("demo"))
	if code != 1 || out != "" || !strings.Contains(errOut, "cannot serve the demo page on "+taken.Addr().String()) ||
		!strings.Contains(errOut, "--addr") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
