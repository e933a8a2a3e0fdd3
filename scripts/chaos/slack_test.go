package chaos

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

const chaosSecret = "chaos-signing-secret"

// effects counts every call that would change anything: the engine (and
// its job queue), the replay records, the tokens and Slack's Web API.
type effects struct{ n atomic.Int64 }

func (e *effects) Preview(_ context.Context, sel engine.Selection, requester string) (*engine.Preview, error) {
	e.n.Add(1)
	return &engine.Preview{DLQ: engine.QueueInfo{Name: sel.DLQ, Exists: true}, Selection: sel.String(), Requester: requester, Problems: []engine.Problem{}}, nil
}
func (e *effects) ApproveConfirmed(context.Context, string, string, string, engine.Params, string) (engine.Approval, error) {
	e.n.Add(1)
	return engine.Approval{}, engine.ErrTokenNotFound
}
func (e *effects) Control(context.Context, string, engine.ControlAction, string) (engine.Replay, error) {
	return e.replay()
}
func (e *effects) Status(context.Context, string) (engine.Replay, error) { return e.replay() }
func (e *effects) Check(context.Context, string, string) (engine.CheckReport, error) {
	e.n.Add(1)
	return engine.CheckReport{}, nil
}
func (e *effects) Park(context.Context, string, string) (engine.ParkResult, error) {
	e.n.Add(1)
	return engine.ParkResult{}, nil
}
func (e *effects) replay() (engine.Replay, error) {
	e.n.Add(1)
	return engine.Replay{}, engine.ErrReplayNotFound
}
func (e *effects) Enqueue(context.Context, string) error              { e.n.Add(1); return nil }
func (e *effects) Get(context.Context, string) (engine.Replay, error) { return e.replay() }
func (e *effects) Update(context.Context, string, func(*engine.Replay) error) error {
	e.n.Add(1)
	return engine.ErrReplayNotFound
}
func (e *effects) List(context.Context, int) ([]engine.Replay, error) { e.n.Add(1); return nil, nil }
func (e *effects) Load(context.Context, string) (engine.Frozen, error) {
	e.n.Add(1)
	return engine.Frozen{}, engine.ErrTokenNotFound
}
func (e *effects) LoadHeader(ctx context.Context, token string) (engine.Frozen, error) {
	return e.Load(ctx, token)
}
func (e *effects) Discard(context.Context, string) error { e.n.Add(1); return nil }
func (e *effects) Compare(context.Context, string) (engine.Frozen, []engine.Change, error) {
	e.n.Add(1)
	return engine.Frozen{}, nil, nil
}

// Take and Give are the operations' windows (ops.Windows): any use is an
// effect.
func (e *effects) Take(context.Context, string, int, int, time.Duration) (ops.Take, error) {
	e.n.Add(1)
	return ops.Take{OK: true}, nil
}
func (e *effects) Give(context.Context, string, string) error { e.n.Add(1); return nil }
func (e *effects) SetMessage(context.Context, string, string, string) error {
	e.n.Add(1)
	return nil
}
func (e *effects) Message(context.Context, string) (string, string, error) {
	e.n.Add(1)
	return "", "", nil
}

// lineCounter counts log lines.
type lineCounter struct{ n atomic.Int64 }

func (c *lineCounter) Write(b []byte) (int, error) {
	c.n.Add(int64(bytes.Count(b, []byte{'\n'})))
	return len(b), nil
}

func sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%s:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// attack is one request and the status the handler must answer.
type attack struct {
	class  string
	method string
	path   string
	body   []byte
	ts     string // X-Slack-Request-Timestamp ("" omits it)
	sig    string // X-Slack-Signature ("" omits it)
	want   int
}

// attacks builds one random forged, stale or malformed request.
func attacks(rng *rand.Rand, slackURL string) attack {
	now := time.Now().Unix()
	fresh := strconv.FormatInt(now, 10)
	user, channel := fmt.Sprintf("U%06d", rng.IntN(1e6)), fmt.Sprintf("C%06d", rng.IntN(1e6))
	dangerous := []string{"replay p_" + strconv.Itoa(rng.IntN(1e9)) + " rate=max", "cancel r_0123456789abcdef",
		"resume r_0123456789abcdef", "preview orders.dlq", "park r_0123456789abcdef", "pause r_0123456789abcdef"}
	command := url.Values{"command": {"/dlq"}, "text": {dangerous[rng.IntN(len(dangerous))]}, "user_id": {user},
		"channel_id": {channel}, "team_id": {"T1"}, "response_url": {slackURL + "/response"}, "trigger_id": {"1.2.3"}}.Encode()
	actionIDs := []string{"dlq.approve", "dlq.discard", "dlq.pause", "dlq.resume", "dlq.cancel", "dlq.park"}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]string{"id": user},
		"channel": map[string]string{"id": channel}, "response_url": slackURL + "/response",
		"container": map[string]string{"message_ts": "1732900000.000100"},
		"actions":   []map[string]string{{"action_id": actionIDs[rng.IntN(len(actionIDs))], "value": "p_forged"}}})
	interaction := url.Values{"payload": {string(payload)}}.Encode()
	path, body := "/slack/commands", []byte(command)
	if rng.IntN(2) == 0 {
		path, body = "/slack/interactions", []byte(interaction)
	}
	a := attack{method: http.MethodPost, path: path, body: body, ts: fresh, want: http.StatusUnauthorized}
	switch k := rng.IntN(100); {
	case k < 15:
		a.class = "forged signature (wrong secret)"
		a.sig = sign(fmt.Sprintf("guess-%d", rng.Uint64()), fresh, body)
	case k < 25:
		a.class = "body changed after signing"
		a.sig = sign(chaosSecret, fresh, body)
		a.body = append(append([]byte(nil), body...), []byte("&text=cancel+r_0123456789abcdef")...)
	case k < 37:
		a.class = "stale timestamp (5 min to 7 days old)"
		old := strconv.FormatInt(now-301-rng.Int64N(7*24*3600), 10)
		a.ts, a.sig = old, sign(chaosSecret, old, body)
	case k < 44:
		a.class = "future timestamp (5 min to 7 days ahead)"
		later := strconv.FormatInt(now+301+rng.Int64N(7*24*3600), 10)
		a.ts, a.sig = later, sign(chaosSecret, later, body)
	case k < 50:
		a.class = "missing signature"
	case k < 55:
		a.class = "missing timestamp"
		a.ts, a.sig = "", sign(chaosSecret, fresh, body)
	case k < 63:
		a.class = "garbage signature"
		good := sign(chaosSecret, fresh, body)
		bad := []string{"v0=", "v0=zz", "v1=" + good[3:], strings.ToUpper(good), good[:len(good)-2],
			good + "00", "v0=" + strings.Repeat("0", 64), hex.EncodeToString([]byte{byte(rng.IntN(256))}), "\x00\xff"}
		a.sig = bad[rng.IntN(len(bad))]
		if a.sig == "" || strings.ContainsAny(a.sig, "\x00\xff") {
			a.sig = "v0=" + strconv.Itoa(rng.IntN(1e9))
		}
	case k < 68:
		a.class = "malformed timestamp"
		bad := []string{"abc", "1e10", "-1", "99999999999999999999", " " + fresh, fresh + ".5", "0x10"}
		a.ts = bad[rng.IntN(len(bad))]
		a.sig = sign(chaosSecret, a.ts, body)
	case k < 93:
		a.class = "malformed body, correctly signed"
		a.want = http.StatusBadRequest
		junk := make([]byte, rng.IntN(512))
		for i := range junk {
			junk[i] = byte(rng.IntN(256))
		}
		cases := [][2]string{
			{"/slack/commands", "%zz%" + string(junk)},
			{"/slack/commands", "text=help&channel_id=" + channel},              // no user, no command
			{"/slack/commands", "command=%2Fdlq&user_id=" + user},               // no channel
			{"/slack/commands", ""},                                             // empty
			{"/slack/interactions", "foo=bar&" + url.QueryEscape(string(junk))}, // no payload
			{"/slack/interactions", "payload=" + url.QueryEscape(string(junk))}, // payload not JSON
			{"/slack/interactions", "payload=%7B%7D"},                           // no type
			{"/slack/interactions", "payload=" + url.QueryEscape(`{"type":"block_actions","user":{"id":"`+user+`"},"actions":[]}`)},
			{"/slack/interactions", "payload=" + url.QueryEscape(`{"type":"block_actions","actions":[{"action_id":"dlq.approve","value":"p_x"}]}`)},
			{"/slack/interactions", "payload=" + url.QueryEscape(`{"type":"block_actions","user":{"id":"`+user+`"},"actions":[{"value":"p_x"}]}`)},
			{"/slack/interactions", "payload=" + url.QueryEscape(`{"type":["block_actions"],"user":"U1","actions":{"a":1}}`)},
		}
		c := cases[rng.IntN(len(cases))]
		a.path, a.body = c[0], []byte(c[1])
		a.sig = sign(chaosSecret, fresh, a.body)
	case k < 94:
		a.class = "oversized body (2 MiB), correctly signed"
		a.want = http.StatusRequestEntityTooLarge
		a.body = []byte("text=" + strings.Repeat("a", 2<<20))
		a.sig = sign(chaosSecret, fresh, a.body)
	case k < 97:
		a.class = "wrong method"
		a.method = []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch}[rng.IntN(4)]
		a.sig = sign(chaosSecret, fresh, body)
		a.want = http.StatusMethodNotAllowed
	default:
		a.class = "unknown path"
		a.path = []string{"/slack/events", "/slack/commands/x", "/slack/", "/metrics/slack/commands"}[rng.IntN(4)]
		a.sig = sign(chaosSecret, fresh, body)
		a.want = http.StatusNotFound
	}
	return a
}

// TestChaosSlackRequests sends 10,000 forged, stale and malformed requests
// to the bot's HTTP handler from 16 concurrent clients. Every one must be
// refused with its status (401 for any signature or timestamp problem, 400,
// 413, 404, 405) and have no effect: no call reaches the engine, the job
// queue, the store or Slack's Web API. A valid request afterwards must still
// work, so that "no effect" is not a broken handler.
func TestChaosSlackRequests(t *testing.T) {
	gate(t)
	const total, clients = 10000, 16
	rng := rand.New(rand.NewPCG(seed(t), 4))
	var slackCalls atomic.Int64
	slackSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slackCalls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1.2"}`)
	}))
	defer slackSrv.Close()
	fx := &effects{}
	logs := &lineCounter{}
	n, err := bot.NewNotifier(bot.Config{SigningSecret: chaosSecret, BotToken: "xoxb-chaos", APIURL: slackSrv.URL + "/api/"},
		bot.NotifierDeps{Replays: fx, Log: zerolog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(ops.Config{}, ops.Deps{Engine: fx, Tokens: fx, Replays: fx, Windows: fx})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(n, bot.Deps{Ops: o, Tokens: fx})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	}()
	srv := httptest.NewServer(b.Handler())
	defer srv.Close()
	baseline := runtime.NumGoroutine()

	work := make([]attack, total)
	for i := range work {
		work[i] = attacks(rng, slackSrv.URL)
	}
	type result struct {
		class  string
		status int
		took   time.Duration
		err    error
	}
	results := make([]result, total)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				a := work[i]
				req, err := http.NewRequest(a.method, srv.URL+a.path, bytes.NewReader(a.body))
				if err != nil {
					results[i] = result{class: a.class, err: err}
					continue
				}
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if a.ts != "" {
					req.Header.Set("X-Slack-Request-Timestamp", a.ts)
				}
				if a.sig != "" {
					req.Header.Set("X-Slack-Signature", a.sig)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				r := result{class: a.class, took: time.Since(t0), err: err}
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					r.status = resp.StatusCode
				}
				results[i] = r
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)

	byClass := map[string]int{}
	byStatus := map[int]int{}
	wrong, failed := 0, 0
	var lat []time.Duration
	for i, r := range results {
		byClass[r.class]++
		if r.err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("%s: %v", r.class, r.err)
			}
			continue
		}
		byStatus[r.status]++
		lat = append(lat, r.took)
		if r.status != work[i].want {
			wrong++
			if wrong <= 5 {
				t.Errorf("%s %s (%q…): status %d, want %d", work[i].method, work[i].path, truncate(work[i].body, 80), r.status, work[i].want)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	effectsSeen, slackSeen := fx.n.Load(), slackCalls.Load()
	if effectsSeen != 0 || slackSeen != 0 {
		t.Errorf("refused requests had effects: %d engine/store calls, %d Slack calls", effectsSeen, slackSeen)
	}
	client.CloseIdleConnections()
	testkit.Eventually(t, 10*time.Second, "the handler's goroutines to end", func() bool {
		return runtime.NumGoroutine() <= baseline+2
	})

	// A valid request still works: the refusals were the handler's doing.
	body := []byte(url.Values{"command": {"/dlq"}, "text": {"preview orders.dlq"}, "user_id": {"U1"},
		"channel_id": {"C1"}, "team_id": {"T1"}, "response_url": {slackSrv.URL + "/response"}}.Encode())
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/slack/commands", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", sign(chaosSecret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid request got %d", resp.StatusCode)
	}
	testkit.Eventually(t, 10*time.Second, "the valid preview to reach the engine", func() bool { return fx.n.Load() > 0 })

	var classes []string
	for c, n := range byClass {
		classes = append(classes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(classes)
	var statuses []string
	for s, n := range byStatus {
		statuses = append(statuses, fmt.Sprintf("%d×%d", n, s))
	}
	sort.Strings(statuses)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))].Round(10 * time.Microsecond)
	}
	figure(t, "slack", "%d forged/stale/malformed requests from %d clients in %s: answered %s; %d with a wrong status, %d transport errors; %d engine/store calls, %d Slack calls (effects: none); %d refusals logged; latency p50 %s, p99 %s, max %s; a valid request afterwards reached the engine. Mix: %s",
		total, clients, took.Round(10*time.Millisecond), strings.Join(statuses, ", "), wrong, failed, effectsSeen, slackSeen, logs.n.Load(),
		pct(0.5), pct(0.99), pct(1), strings.Join(classes, "; "))
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}
