package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/store"
)

const (
	tokRemoteAlice = "remote-alice-token-0123456789"
	tokRemoteBob   = "remote-bob-token-0123456789"
)

// remotePolicy is a permissions file with two principals, alice and bob,
// each with a personal token, both allowed everything, and four-eyes on
// (nobody approves their own preview).
func remotePolicy(t *testing.T) string {
	t.Helper()
	perm := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: alice
    token_sha256: `+commands.HashToken(tokRemoteAlice)+`
  - name: bob
    token_sha256: `+commands.HashToken(tokRemoteBob)+`
roles:
  - name: sre
    principals: [alice, bob]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
approval:
  require_distinct_approver: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return perm
}

// remoteServer runs `dlqbot serve` in this process with env (its HTTP API,
// its workers, its audit trail in Redis) and returns its base URL.
func remoteServer(t *testing.T, env map[string]string) string {
	t.Helper()
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := openApp(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.newReplica()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.run(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; a.Close() })
	return "http://" + ln.Addr().String()
}

// clientEnv is a client's whole environment: the server and a token, and
// a broker and Redis that answer nobody (port 1), no signing key: a
// client that opened either would fail.
func clientEnv(base, token string) map[string]string {
	return map[string]string{"DLQBOT_SERVER": base, "DLQBOT_TOKEN": token,
		"AMQP_URL": "amqp://guest:guest@127.0.0.1:1/", "RABBITMQ_MANAGEMENT_URL": "http://127.0.0.1:1", "REDIS_URL": "redis://127.0.0.1:1/0"}
}

// TestTerminalThroughServer: the terminal with DLQBOT_SERVER and a
// personal token, and no broker, Redis or signing key it could use:
// preview works as alice; alice approving her own preview is refused by
// four-eyes (exit 1, code needs_second_person) and nothing moves; bob's
// approval runs to finished on the server's workers; alice's `status
// --follow` shows another replay to its end; the audit trail, read
// through the server, records every step with the terminal as front end,
// and each replay names the front end its approval came through.
func TestTerminalThroughServer(t *testing.T) {
	t.Parallel()
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", remotePolicy(t))
	base := remoteServer(t, env)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(10, 100)...)
	r.WaitCount(dlq, 10, 20*time.Second)
	cons := r.Consume(src, func(amqp.Delivery) string { return "ack" })
	alice, bob := clientEnv(base, tokRemoteAlice), clientEnv(base, tokRemoteBob)

	out, stderr, code := dlqbot(t, alice, "preview", dlq, "limit=5", "--json")
	if code != 0 {
		t.Fatalf("preview through the server: exit %d\n%s\n%s", code, out, stderr)
	}
	doc := oneJSON(t, out)
	token, _ := doc["token"].(string)
	if token == "" || doc["selected"] != float64(5) || doc["requester"] != "api:alice" {
		t.Fatalf("preview document: token %q selected %v requester %v", token, doc["selected"], doc["requester"])
	}
	text, _, code := dlqbot(t, alice, "preview", dlq, "limit=2")
	if code != 0 || !strings.Contains(text, "Token: p_") || !strings.Contains(text, "2 selected") {
		t.Fatalf("text preview through the server (exit %d):\n%s", code, text)
	}

	out, _, code = dlqbot(t, alice, "replay", token, "rate=max", "--json")
	if doc := oneJSON(t, out); code != exitFailed || doc["code"] != "needs_second_person" {
		t.Fatalf("alice approving her own preview: exit %d, %s", code, out)
	}
	if n := r.Count(dlq); n != 10 {
		t.Fatalf("a refused approval moved messages: %d in the DLQ, want 10", n)
	}

	out, stderr, code = dlqbot(t, bob, "replay", token, "step=2", "rate=max", "--json")
	doc = oneJSON(t, out)
	if code != 0 || doc["state"] != "finished" || doc["sent"] != float64(5) || doc["approver"] != "api:bob" || doc["requester"] != "api:alice" {
		t.Fatalf("bob's approval: exit %d\n%s\n%s", code, out, stderr)
	}
	id, _ := doc["replay_id"].(string)
	if doc["approved_via"] != "terminal" {
		t.Errorf("bob approved at the terminal (through the server); the replay says approved via %v", doc["approved_via"])
	}

	// Another preview, approved by bob through the API slowly; alice
	// follows it to its end over the event stream.
	out, _, _ = dlqbot(t, alice, "preview", dlq, "--json")
	second, _ := oneJSON(t, out)["token"].(string)
	status, body := apiCall(t, base, tokRemoteBob, "POST", "/api/v1/previews/"+second+"/approve", map[string]any{"step": 1, "rate": 2})
	if status != 201 {
		t.Fatalf("bob approving the second preview: %d %v", status, body)
	}
	id2, _ := body["replay_id"].(string)
	out, stderr, code = dlqbot(t, alice, "status", id2, "--follow", "--json")
	doc = oneJSON(t, out)
	if code != 0 || doc["state"] != "finished" || doc["sent"] != float64(5) {
		t.Fatalf("status --follow through the server: exit %d\n%s\n%s", code, out, stderr)
	}
	if doc["approved_via"] != "api" {
		t.Errorf("bob approved through the API; the replay says approved via %v", doc["approved_via"])
	}
	if !strings.Contains(stderr, id2) {
		t.Errorf("status --follow showed no progress on stderr: %q", stderr)
	}
	if n := r.Count(dlq); n != 0 {
		t.Fatalf("%d message(s) left in the DLQ, want 0", n)
	}
	testkit.Eventually(t, 10*time.Second, "the consumer to ack 10", func() bool { acked, _ := cons.Counts(); return acked == 10 })

	out, _, code = dlqbot(t, alice, "status", id, "--json")
	if doc := oneJSON(t, out); code != 0 || doc["state"] != "finished" {
		t.Fatalf("status through the server: exit %d %s", code, out)
	}
	out, _, code = dlqbot(t, alice, "check", id, "--json")
	if doc := oneJSON(t, out); code != 0 || doc["replayed"] != float64(5) {
		t.Fatalf("check through the server: exit %d %s", code, out)
	}
	t.Cleanup(func() { r.DeleteQueue(engine.ParkingQueue(dlq)) })
	out, _, code = dlqbot(t, alice, "park", id, "--json")
	if doc := oneJSON(t, out); code != 0 || doc["replay_id"] != id || doc["queue"] != engine.ParkingQueue(dlq) || doc["parked"] != float64(0) {
		t.Fatalf("park through the server: exit %d %s", code, out)
	}
	if out, _, code := dlqbot(t, alice, "park", "--json"); code != exitUsage || !strings.Contains(oneJSON(t, out)["error"].(string), "one replay id") {
		t.Fatalf("park without an id: exit %d %s", code, out)
	}
	out, _, code = dlqbot(t, alice, "pause", id, "--json")
	if doc := oneJSON(t, out); code != exitFailed || doc["code"] != "not_controllable" {
		t.Fatalf("pausing a finished replay through the server: exit %d %s", code, out)
	}

	// The trail, read through the server: each step from the terminal.
	out, _, code = dlqbot(t, alice, "audit", "front_end=terminal", "--json")
	if code != 0 {
		t.Fatalf("audit through the server: exit %d %s", code, out)
	}
	var got []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e audit.Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("audit line: %v\n%s", err, out)
		}
		got = append(got, e.Principal+" "+e.Op+" "+e.Outcome+" "+e.Code)
	}
	for _, want := range []string{"alice preview ok ", "alice approve refused needs_second_person", "bob approve ok ", "alice follow ok ", "alice check ok ", "alice park ok ", "alice pause refused not_controllable"} {
		if !containsLine(got, want) {
			t.Errorf("the trail has no %q from the terminal: %q", want, got)
		}
	}
	// bob's approval through the API is the API's.
	if containsLine(got, "bob approve ok ") && strings.Count(strings.Join(got, "\n"), "bob approve ok") != 1 {
		t.Errorf("bob's API approval recorded as the terminal's: %q", got)
	}

	// The operator's direct terminal follows a replay through the
	// operations too: an OS account whose principal may not read the DLQ
	// is refused, and sees none of the record.
	if me := currentUser(); me != "" {
		perm := filepath.Join(t.TempDir(), "reader.yaml")
		if err := os.WriteFile(perm, []byte("principals:\n  - name: op\n    os_users: ["+me+"]\nroles:\n  - name: op\n    principals: [op]\n    grants:\n      - queues: [\"elsewhere.*\"]\n        actions: [read]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, code = dlqbot(t, merge(env, "DLQBOT_PERMISSIONS", perm), "status", id, "--follow", "--json")
		if doc := oneJSON(t, out); code != exitFailed || doc["code"] != "forbidden" || doc["state"] != nil {
			t.Fatalf("status --follow without read: exit %d %s", code, out)
		}
	}

	// A token the server does not know is a configuration mistake.
	out, _, code = dlqbot(t, clientEnv(base, "nobody-knows-this-token"), "status", "--json")
	if doc := oneJSON(t, out); code != exitUsage || !strings.Contains(doc["error"].(string), "DLQBOT_TOKEN") {
		t.Fatalf("an unknown token: exit %d %s", code, out)
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestMCPThroughServer: `dlqbot mcp` (stdio, the real binary) with
// DLQBOT_SERVER and a token, and no broker, Redis or signing key it could
// use: dlq_preview and dlq_status answer through the server, as the
// token's principal, and the trail records them with mcp as front end.
func TestMCPThroughServer(t *testing.T) {
	t.Parallel()
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", remotePolicy(t))
	base := remoteServer(t, env)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(4, 100)...)
	r.WaitCount(dlq, 4, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	cmd := exec.Command(os.Args[0], "mcp")
	cmd.Env = []string{"DLQBOT_RUN_MAIN=1", "PATH=" + os.Getenv("PATH")}
	for k, v := range clientEnv(base, tokRemoteAlice) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := sdk.NewClient(&sdk.Implementation{Name: "cmd-test", Version: "v0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_preview", Arguments: map[string]any{"selection": dlq}})
	if err != nil || res.IsError {
		t.Fatalf("dlq_preview: %v %+v", err, res)
	}
	data, _ := json.Marshal(res.StructuredContent)
	var p engine.Preview
	if err := json.Unmarshal(data, &p); err != nil || p.Token == "" || p.Selected != 4 || p.Requester != "api:alice" {
		t.Fatalf("dlq_preview answered %s (%v)", data, err)
	}
	// Alice's own approval: four-eyes, through the server.
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_replay", Arguments: map[string]any{"token": p.Token}})
	if err != nil || !res.IsError || !strings.Contains(toolText(res), "needs_second_person") {
		t.Fatalf("dlq_replay of her own preview: %v %s", err, toolText(res))
	}
	status, body := apiCall(t, base, tokRemoteBob, "POST", "/api/v1/previews/"+p.Token+"/approve", map[string]any{"rate": "max"})
	if status != 201 {
		t.Fatalf("bob's approval: %d %v", status, body)
	}
	id, _ := body["replay_id"].(string)
	var rep engine.Replay
	testkit.Eventually(t, 60*time.Second, "dlq_status to show the replay finished", func() bool {
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "dlq_status", Arguments: map[string]any{"replay_id": id}})
		if err != nil || res.IsError {
			return false
		}
		data, _ := json.Marshal(res.StructuredContent)
		return json.Unmarshal(data, &rep) == nil && rep.State == engine.StateFinished
	})
	if rep.Sent != 4 || r.Count(dlq) != 0 {
		t.Fatalf("replay %+v; %d left in the DLQ", rep, r.Count(dlq))
	}
	status, _ = apiCall(t, base, tokRemoteAlice, "GET", "/api/v1/audit?front_end=mcp&op=preview", nil)
	if status != 200 {
		t.Fatalf("audit: %d", status)
	}
	entries := auditVia(t, base, tokRemoteAlice, "front_end=mcp")
	if !containsLine(entries, "alice preview ok ") || !containsLine(entries, "alice approve refused needs_second_person") {
		t.Errorf("the trail does not show the MCP calls: %q", entries)
	}
}

func toolText(res *sdk.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// auditVia reads the trail through the API: "principal op outcome code".
func auditVia(t *testing.T, base, tok, query string) []string {
	t.Helper()
	out, _, code := dlqbot(t, clientEnv(base, tok), "audit", query, "--json")
	if code != 0 {
		t.Fatalf("audit: exit %d %s", code, out)
	}
	var got []string
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e audit.Entry
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Principal+" "+e.Op+" "+e.Outcome+" "+e.Code)
	}
	return got
}

// TestDirectModeNeedsPolicyOrOpen: without DLQBOT_SERVER, a permissions
// file or DLQBOT_ACCESS=open, the terminal, `dlqbot audit` and `dlqbot
// mcp` refuse (exit 2) naming DLQBOT_ACCESS and DLQBOT_SERVER, reading
// no queue; help still answers.
func TestDirectModeNeedsPolicyOrOpen(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	delete(env, "DLQBOT_ACCESS")
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(3, 100)...)
	r.WaitCount(dlq, 3, 20*time.Second)
	named := func(s string) bool {
		return strings.Contains(s, "DLQBOT_ACCESS=open") && strings.Contains(s, "DLQBOT_SERVER")
	}
	out, _, code := dlqbot(t, env, "preview", dlq)
	if code != exitUsage || !named(out) {
		t.Fatalf("preview: exit %d %q", code, out)
	}
	out, _, code = dlqbot(t, env, "preview", dlq, "--json")
	if doc := oneJSON(t, out); code != exitUsage || !named(doc["error"].(string)) {
		t.Fatalf("preview --json: exit %d %s", code, out)
	}
	if _, stderr, code := dlqbot(t, env, "mcp"); code != exitUsage || !named(stderr) {
		t.Fatalf("mcp: exit %d %q", code, stderr)
	}
	if out, _, code := dlqbot(t, env, "audit"); code != exitUsage || !named(out) {
		t.Fatalf("audit: exit %d %q", code, out)
	}
	if out, _, code := dlqbot(t, env, "help"); code != 0 || !strings.Contains(out, "preview") {
		t.Fatalf("help: exit %d %q", code, out)
	}
	if n := r.Count(dlq); n != 3 {
		t.Fatalf("%d in the DLQ, want 3", n)
	}
	// With DLQBOT_ACCESS=open the operator acts directly.
	if out, _, code := dlqbot(t, merge(env, "DLQBOT_ACCESS", "open"), "preview", dlq, "--json"); code != 0 || oneJSON(t, out)["selected"] != float64(3) {
		t.Fatalf("preview with DLQBOT_ACCESS=open: exit %d %s", code, out)
	}
}

// TestPolicyAlwaysSigns: where a permissions file is loaded, records are
// signed whatever DLQBOT_ACCESS says. serve with a policy and
// DLQBOT_ACCESS=open but no key refuses to start naming the key (it
// started, writing unsigned records, before); so do the direct terminal
// and `dlqbot mcp`; with the key and DLQBOT_ACCESS=open, a preview's
// frozen record is signed with it.
func TestPolicyAlwaysSigns(t *testing.T) {
	t.Parallel()
	env := merge(merge(testEnv(t), "DLQBOT_PERMISSIONS", remotePolicy(t)), "DLQBOT_HTTP_ADDR", freeAddr(t))
	nokey := merge(env, "DLQBOT_SIGNING_KEY", "")
	if _, stderr, code := dlqbot(t, nokey, "serve"); code != exitUsage || !strings.Contains(stderr, "DLQBOT_SIGNING_KEY") {
		t.Fatalf("serve with a policy, DLQBOT_ACCESS=open and no key: exit %d %q", code, stderr)
	}
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(3, 100)...)
	r.WaitCount(dlq, 3, 20*time.Second)
	if out, _, code := dlqbot(t, nokey, "preview", dlq); code != exitUsage || !strings.Contains(out, "DLQBOT_SIGNING_KEY") {
		t.Fatalf("direct preview with a policy and no key: exit %d %q", code, out)
	}
	if _, stderr, code := dlqbot(t, merge(nokey, "DLQBOT_MCP_TOKEN", tokRemoteAlice), "mcp"); code != exitUsage || !strings.Contains(stderr, "DLQBOT_SIGNING_KEY") {
		t.Fatalf("direct mcp with a policy and no key: exit %d %q", code, stderr)
	}

	// The operator's own terminal: os_users is not set for this uid, so
	// it may read but not change; a preview is a read that writes the
	// frozen token, signed.
	me := currentUser()
	if me == "" {
		t.Skip("no OS user name to map in the policy")
	}
	perm := filepath.Join(t.TempDir(), "op.yaml")
	if err := os.WriteFile(perm, []byte(`principals:
  - name: op
    os_users: [`+me+`]
roles:
  - name: sre
    principals: [op]
    grants:
      - queues: ["*"]
        actions: [read, replay, publish]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := dlqbot(t, merge(env, "DLQBOT_PERMISSIONS", perm), "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("direct preview with a policy, the key and DLQBOT_ACCESS=open: exit %d %s", code, out)
	}
	token, _ := oneJSON(t, out)["token"].(string)
	rdb, err := store.Open(env["REDIS_URL"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	read := func(key string) error {
		st, err := store.New(store.Config{Prefix: env["DLQBOT_REDIS_PREFIX"], SigningKey: []byte(key)}, rdb, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Tokens().Load(context.Background(), token)
		return err
	}
	if err := read(testSigningKey); err != nil {
		t.Fatalf("the frozen preview does not verify with the key: %v", err)
	}
	var se *store.SignatureError
	if err := read("another-signing-key-0123456789abcdef"); !errors.As(err, &se) {
		t.Fatalf("the frozen preview verified with another key (unsigned?): %v", err)
	}
}

// TestOSUserIsTheUIDs: the direct terminal's identity is the uid's name,
// whatever $USER says, and a uid with no name is refused (exit 2).
func TestOSUserIsTheUIDs(t *testing.T) {
	u, err := user.LookupId(strconv.Itoa(os.Getuid()))
	if err != nil {
		t.Skipf("this uid has no name here: %v", err)
	}
	t.Setenv("USER", "mallory-"+u.Username)
	if got := currentUser(); got != u.Username {
		t.Fatalf("currentUser() = %q with USER=%q, want the uid's %q", got, os.Getenv("USER"), u.Username)
	}
	_, err = uidName(54321, func(string) (*user.User, error) { return nil, user.UnknownUserIdError(54321) })
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "uid 54321") {
		t.Fatalf("a uid without a name: %v (exit %d)", err, exitCode(err))
	}
}

// TestClientServerUnreachable: a client whose server does not answer
// fails (exit 1) saying so, and a DLQBOT_SERVER without DLQBOT_TOKEN is a
// usage error naming the token.
func TestClientServerUnreachable(t *testing.T) {
	t.Parallel()
	env := clientEnv("http://"+freeAddr(t), "some-token")
	out, _, code := dlqbot(t, env, "status", "--json")
	if doc := oneJSON(t, out); code != exitFailed || !strings.Contains(doc["error"].(string), "cannot be reached") {
		t.Fatalf("an unreachable server: exit %d %s", code, out)
	}
	out, _, code = dlqbot(t, merge(env, "DLQBOT_TOKEN", ""), "status")
	if code != exitUsage || !strings.Contains(out, "DLQBOT_TOKEN") {
		t.Fatalf("no token: exit %d %q", code, out)
	}
}

// TestNamelessUIDIsRefused runs the binary as a uid with no passwd entry
// and USER=root: the direct terminal refuses (exit 2) naming the uid,
// instead of acting as $USER says (it did, as terminal:root). Root only.
func TestNamelessUIDIsRefused(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	const uid = 54321
	if _, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		t.Skipf("uid %d has a name here", uid)
	}
	dir, err := os.MkdirTemp("", "dlqbot-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "dlqbot")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(2, 100)...)
	r.WaitCount(dlq, 2, 20*time.Second)
	cmd := exec.Command(bin, "preview", dlq, "--json")
	cmd.Env = []string{"DLQBOT_RUN_MAIN=1", "USER=root", "LOGNAME=root", "HOME=" + dir}
	for k, v := range testEnv(t) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, _ := cmd.Output()
	code := cmd.ProcessState.ExitCode()
	if doc := oneJSON(t, string(out)); code != exitUsage || !strings.Contains(doc["error"].(string), "uid 54321 has no user name") {
		t.Fatalf("preview as a nameless uid with USER=root: exit %d %s", code, out)
	}
}

// TestTerminalPauseResumeThroughServer: through the server, alice pauses
// a slow replay bob approved, and bob's `resume` follows it from paused
// to finished (the stream's earlier "paused" event does not end it).
func TestTerminalPauseResumeThroughServer(t *testing.T) {
	t.Parallel()
	env := merge(testEnv(t), "DLQBOT_PERMISSIONS", remotePolicy(t))
	base := remoteServer(t, env)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(6, 100)...)
	r.WaitCount(dlq, 6, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })
	alice, bob := clientEnv(base, tokRemoteAlice), clientEnv(base, tokRemoteBob)

	out, _, _ := dlqbot(t, alice, "preview", dlq, "--json")
	token, _ := oneJSON(t, out)["token"].(string)
	status, body := apiCall(t, base, tokRemoteBob, "POST", "/api/v1/previews/"+token+"/approve", map[string]any{"step": 1, "cap": 1, "rate": 1})
	if status != 201 {
		t.Fatalf("bob's approval: %d %v", status, body)
	}
	id, _ := body["replay_id"].(string)
	testkit.Eventually(t, 30*time.Second, "the replay to send its first message", func() bool {
		_, cur := apiCall(t, base, tokRemoteAlice, "GET", "/api/v1/replays/"+id, nil)
		return cur["sent"].(float64) >= 1
	})
	out, _, code := dlqbot(t, alice, "pause", id, "--json")
	if code != 0 {
		t.Fatalf("pause through the server: exit %d %s", code, out)
	}
	testkit.Eventually(t, 30*time.Second, "the replay to pause", func() bool {
		_, cur := apiCall(t, base, tokRemoteAlice, "GET", "/api/v1/replays/"+id, nil)
		return cur["state"] == "paused"
	})
	if n := r.Count(dlq); n == 0 {
		t.Fatalf("the paused replay sent everything")
	}
	out, stderr, code := dlqbot(t, bob, "resume", id, "--json")
	doc := oneJSON(t, out)
	if code != 0 || doc["state"] != "finished" || doc["sent"] != float64(6) {
		t.Fatalf("resume through the server: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := r.Count(dlq); n != 0 {
		t.Fatalf("%d left in the DLQ", n)
	}
}
