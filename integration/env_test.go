package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/store"
)

const (
	secret   = "integration-signing-secret"
	channel  = "C0OPS"
	activity = "C0ACTIVITY"
)

// fast makes canary steps settle quickly.
var fast = replay.Config{SettleGrace: 300 * time.Millisecond, SettlePoll: 50 * time.Millisecond,
	ControlPoll: 50 * time.Millisecond, LeaseTTL: 15 * time.Second} // LeaseTTL, the default: under make test's load a heartbeat came later than 3 s, and a pause found the run's owner gone

// options tune an env.
type options struct {
	policy   string // permissions YAML; "" = access control off
	appToken string // enables Socket Mode
	// apiChannel is the bot's DLQBOT_API_CHANNEL; events logs replay
	// events for the HTTP API's event stream.
	apiChannel string
	events     bool
	// on is the broker (testkit.EachBroker); zero means RabbitMQ 3.10.
	on testkit.Broker
	// logs, when set, receives the bot's and the engine's log lines.
	logs io.Writer
	// signingKey, when set, signs the store's records; refusals are
	// logged at Error to logs.
	signingKey []byte
	// teamID is the bot's DLQBOT_SLACK_TEAM_ID; requireHuman the
	// operations' DLQBOT_MCP_REQUIRE_HUMAN; scanLimit their scan limit
	// (0: the default).
	teamID       string
	requireHuman bool
	scanLimit    int
	// storeAudit records the operations in the store's audit trail in
	// Redis (as `dlqbot serve` does) instead of env.trail.
	storeAudit bool
	// followUps, when set, are the engine's follow-up checks, run from
	// the store's schedule every 100 ms.
	followUps []time.Duration
	// noWorker leaves the env without a worker: another replica's runs
	// its replays.
	noWorker bool
	// taps gives the engine its tap support, as `dlqbot serve` wires it:
	// a replay of a DLQ fed through a dead-letter exchange then finds
	// returns through a tap; without, every replay re-reads its DLQ.
	taps bool
}

// env is one test's bot, engine, store, worker and Slack stand-in.
type env struct {
	t      testing.TB
	rabbit *testkit.Rabbit
	store  *store.Store
	svc    *replay.Service
	ops    *ops.Ops
	trail  *testkit.Trail
	stub   *slackstub.Stub
	bot    *bot.Bot
	srv    *httptest.Server
	ctx    context.Context
	// rdb and prefix are the store's Redis and key prefix, for tests
	// that change Redis behind dlqbot's back.
	rdb    redis.UniversalClient
	prefix string
}

func logger() zerolog.Logger {
	if os.Getenv("DLQBOT_TEST_LOG") != "" {
		return zerolog.New(os.Stderr).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

func newEnv(t testing.TB, o options) *env {
	t.Helper()
	if o.on.Name == "" {
		o.on = testkit.Rabbit3
	}
	rdb, prefix := testkit.Redis(t)
	log, cfg := logger(), fast
	if o.logs != nil {
		log = zerolog.New(io.MultiWriter(o.logs, logWriter())).With().Timestamp().Logger()
		cfg.Log = log
	}
	cfg.FollowUps = o.followUps
	sc := store.Config{Prefix: prefix, SigningKey: o.signingKey}
	if o.signingKey != nil {
		sc.OnBadSignature = func(err *store.SignatureError) {
			log.Error().Str("record", err.Kind).Str("id", err.ID).Str("reason", err.Reason).Msg("refused a record that failed its signature check")
		}
	}
	st, err := store.New(sc, rdb, engine.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := amqp.New(amqp.Config{URL: o.on.AMQPURL, ManagementURL: o.on.ManagementURL, ReadMarks: st.ReadMarks()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	stub := slackstub.New(secret)
	t.Cleanup(stub.Close)
	var policy *commands.Policy
	if o.policy != "" {
		if policy, err = commands.ParsePolicy([]byte(o.policy)); err != nil {
			t.Fatal(err)
		}
	}
	// The Slack notifier comes first: the engine notifies it, and the bot
	// built on it drives the engine.
	slack, err := bot.NewNotifier(bot.Config{SigningSecret: secret, BotToken: "xoxb-integration", AppToken: o.appToken,
		APIURL: stub.APIURL(), ActivityChannel: activity, APIChannel: o.apiChannel, TeamID: o.teamID},
		bot.NotifierDeps{Replays: st.Replays(), Refs: st.SlackRefs(), Previews: st.Tokens(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var notifier engine.Notifier = slack
	if o.events {
		notifier = engine.Notifiers{slack, api.RecordEvents(st.Events(), logger())}
	}
	// The policy's redaction applies to every preview, as serve wires it.
	var redactor engine.Redactor
	if policy != nil {
		redactor = policy
	}
	deps := replay.Deps{Broker: b, Mover: b, Counters: b, Watches: b, Tokens: st.Tokens(), Ledger: st.Ledger(),
		Replays: st.Replays(), Leases: st.Leases(), Schedule: st.Schedule(), Notifier: notifier, Jobs: st.Jobs(), Registry: st.Workers(), Claims: st.Claims(),
		Redactor: redactor, Consumers: testkit.ConsumersOff{}, Taps: testkit.TapOff{}, Returns: testkit.TapOff{}, TapGaps: testkit.TapOff{}}
	if o.taps {
		deps.Taps, deps.Returns, deps.TapGaps = b, st.Returns(), st.TapGaps()
	}
	svc, err := replay.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	trail := &testkit.Trail{}
	var rec audit.Recorder = trail
	if o.storeAudit {
		rec = st.Audit()
	}
	ops, err := ops.New(ops.Config{Policy: policy, RequireHuman: o.requireHuman, ScanLimit: o.scanLimit},
		ops.Deps{Engine: svc, Tokens: st.Tokens(), Replays: st.Replays(), Windows: st.Windows(), Groups: slack.UserGroups(),
			Audit: rec, Queues: b, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	bt, err := bot.New(slack, bot.Deps{Ops: ops, Tokens: st.Tokens(), Seen: st.SlackRequests()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/slack/", bt.Handler())
	srv := httptest.NewServer(mux)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if !o.noWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As serve wires it: the worker checks each replay against its own policy.
			_ = svc.Work(ctx, engine.WorkerConfig{Block: 200 * time.Millisecond, Authorizer: ops})
		}()
	}
	if o.followUps != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			svc.FollowUps(ctx, 100*time.Millisecond)
		}()
	}
	if o.appToken != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := bt.RunSocketMode(ctx); err != nil {
				t.Errorf("socket mode: %v", err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = bt.Shutdown(sctx)
		srv.Close()
	})
	ops.SetAsker(bt)
	return &env{t: t, rabbit: o.on.Dial(t), store: st, svc: svc, ops: ops, trail: trail, stub: stub, bot: bt, srv: srv, ctx: ctx,
		rdb: rdb, prefix: prefix}
}

// command sends a signed slash command and returns its ack body.
func (e *env) command(user, text string) string {
	e.t.Helper()
	resp, err := e.stub.SlashCommand(e.srv.URL, "/dlq", text, user, channel)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("/dlq %s: status %d: %s", text, resp.StatusCode, body)
	}
	return string(body)
}

// click sends a signed button click and checks it was acked.
func (e *env) click(user, actionID, value, ts string) {
	e.t.Helper()
	resp, err := e.stub.Click(e.srv.URL, actionID, value, user, channel, ts)
	if err != nil {
		e.t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("click %s: status %d", actionID, resp.StatusCode)
	}
}

// waitPreview waits for the n-th top-level message with an Approve button
// and returns it with its token.
func (e *env) waitPreview(n int) (slackstub.Message, string) {
	e.t.Helper()
	var found []slackstub.Message
	testkit.Eventually(e.t, time.Minute, "a preview in the channel", func() bool {
		found = found[:0]
		for _, m := range e.stub.Messages(channel) {
			if buttonValue(m.RawBlocks, blocks.ActionApprove) != "" {
				found = append(found, m)
			}
		}
		return len(found) >= n
	})
	m := found[n-1]
	return m, buttonValue(m.RawBlocks, blocks.ActionApprove)
}

// thread returns the message at ts with its replies.
func (e *env) thread(ts string) slackstub.Message {
	m, ok := e.stub.Message(channel, ts)
	if !ok {
		e.t.Fatalf("no message %s", ts)
	}
	return m
}

// progress returns the progress message in the thread of ts (the first
// reply carrying a replay's blocks).
func (e *env) progress(ts string) (slackstub.Message, bool) {
	for _, r := range e.thread(ts).Replies {
		if strings.Contains(r.Content(), "*Replay* `") {
			return r, true
		}
	}
	return slackstub.Message{}, false
}

// waitProgress waits until the progress message in the thread of ts
// contains want.
func (e *env) waitProgress(ts, want string, within time.Duration) slackstub.Message {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		m, ok := e.progress(ts)
		if ok && strings.Contains(m.Content(), want) {
			return m
		}
		if time.Now().After(deadline) {
			var states []string
			for _, r := range e.replays() {
				states = append(states, fmt.Sprintf("%s %s sent %d/%d step %d: %s", r.ID, r.State, r.Sent, r.Total, r.Step, r.Note))
			}
			e.t.Fatalf("timed out after %s waiting for the progress message to show %q; replays %q; progress message (%d edits): %q",
				within, want, states, m.Edits(), m.Content())
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// replies returns the texts of the plain replies in the thread of ts.
func (e *env) replies(ts string) []string {
	var out []string
	for _, r := range e.thread(ts).Replies {
		if len(r.RawBlocks) == 0 && r.Text != "" {
			out = append(out, r.Text)
		}
	}
	return out
}

// activityLines returns the activity channel's lines.
func (e *env) activityLines() []string {
	var out []string
	for _, m := range e.stub.Messages(activity) {
		out = append(out, m.Text)
	}
	return out
}

// waitEphemeral waits for user's n-th ephemeral message and returns it.
func (e *env) waitEphemeral(user string, n int) slackstub.Ephemeral {
	e.t.Helper()
	testkit.Eventually(e.t, 20*time.Second, "an ephemeral reply to "+user, func() bool { return len(e.stub.Ephemerals(user)) >= n })
	return e.stub.Ephemerals(user)[n-1]
}

// replays lists every replay in the store.
func (e *env) replays() []engine.Replay {
	rs, err := e.store.Replays().List(context.Background(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

// assertEditsSpaced checks that m was never edited twice within a second.
func assertEditsSpaced(t testing.TB, m slackstub.Message) {
	t.Helper()
	for i := 1; i < len(m.EditedAt); i++ {
		if gap := m.EditedAt[i].Sub(m.EditedAt[i-1]); gap < bot.DefaultEditInterval { // the bot waits EditInterval from Slack's answer to the previous edit, so however late a request arrives the next comes later still
			t.Errorf("message %s edited twice within %s", m.TS, gap)
		}
	}
}

// buttonValue returns the value of the first button actionID in raw
// blocks ("" when none).
func buttonValue(raw json.RawMessage, actionID string) string {
	var bs []struct {
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if json.Unmarshal(raw, &bs) != nil {
		return ""
	}
	for _, b := range bs {
		for _, el := range b.Elements {
			if el.ActionID == actionID {
				return el.Value
			}
		}
	}
	return ""
}

// contains reports whether any of lines contains want.
func contains(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}
