package slackstub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/internal/demo/slackstub"
)

// TestPageForwardsSignedCommandsAndClicks drives the page's endpoints
// without a browser: a command typed on the page reaches the bot signed
// like Slack, its ack shows as an ephemeral message, a click arrives as a
// block_actions payload, and a read of the state waits for the next
// change.
func TestPageForwardsSignedCommandsAndClicks(t *testing.T) {
	const secret = "web-test-secret"
	got := make(chan url.Values, 4)
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		body, _ := io.ReadAll(r.Body)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		form, _ := url.ParseQuery(string(body))
		form.Set("path", r.URL.Path)
		got <- form
		if r.URL.Path == slackstub.CommandsPath {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"response_type":"ephemeral","text":"Previewing *orders.dlq*"}`)
		}
	}))
	defer bot.Close()
	s, err := slackstub.Listen("127.0.0.1:0", secret)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetWeb(slackstub.WebConfig{BotURL: bot.URL, User: "U0WEBUSER", Channels: []slackstub.WebChannel{{ID: "C0WEB", Name: "web"}}})

	page := get(t, s.URL()+"/")
	if !strings.Contains(page, `id="command-input"`) {
		t.Fatalf("GET / served %.200q", page)
	}
	rev := state(t, s.URL(), -1).Rev

	post(t, s.URL()+"/ui/command", `{"channel":"C0WEB","text":"/dlq preview orders.dlq"}`)
	cmd := <-got
	if cmd.Get("path") != slackstub.CommandsPath || cmd.Get("command") != "/dlq" || cmd.Get("text") != "preview orders.dlq" ||
		cmd.Get("user_id") != "U0WEBUSER" || cmd.Get("channel_id") != "C0WEB" || cmd.Get("response_url") == "" {
		t.Fatalf("command form %v", cmd)
	}
	st := state(t, s.URL(), rev) // returns at once: the command changed the page
	items := st.Channels[0].Items
	if len(items) != 2 || items[0].Kind != "command" || items[1].Kind != "ephemeral" || items[1].Text != "Previewing *orders.dlq*" {
		t.Fatalf("items %+v", items)
	}
	if e := s.Ephemerals("U0WEBUSER"); len(e) != 1 || e[0].Via != "ack" {
		t.Fatalf("ephemerals %+v", e)
	}

	// A read at the current revision waits for the next change: the
	// bot's answer through the response_url.
	done := make(chan pageState, 1)
	go func() { done <- state(t, s.URL(), st.Rev) }()
	post(t, cmd.Get("response_url"), `{"text":"done","response_type":"ephemeral"}`)
	select {
	case st = <-done:
		if n := len(st.Channels[0].Items); n != 3 {
			t.Fatalf("%d items after the response_url post, want 3", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the state read did not return after a change")
	}

	post(t, s.URL()+"/ui/click", `{"channel":"C0WEB","ts":"1732900000.000100","action_id":"dlq.approve","value":"p_tok"}`)
	click := <-got
	var p slack.InteractionCallback
	if err := json.Unmarshal([]byte(click.Get("payload")), &p); err != nil {
		t.Fatal(err)
	}
	if click.Get("path") != slackstub.InteractionsPath || p.Type != slack.InteractionTypeBlockActions || p.User.ID != "U0WEBUSER" ||
		p.ActionCallback.BlockActions[0].ActionID != "dlq.approve" || p.ActionCallback.BlockActions[0].Value != "p_tok" {
		t.Fatalf("click payload %s", click.Get("payload"))
	}

	post(t, s.URL()+"/ui/command", `{"channel":"C0WEB","text":"/deploy now"}`)
	last := state(t, s.URL(), -1).Channels[0].Items
	if n := last[len(last)-1]; n.Kind != "slackbot" || !strings.Contains(n.Text, "not a valid command") {
		t.Fatalf("unknown command answered %+v", n)
	}
}

// pageState is the part of GET /ui/state the test reads.
type pageState struct {
	Rev      int64 `json:"rev"`
	Channels []struct {
		ID    string `json:"id"`
		Items []struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"items"`
	} `json:"channels"`
}

func state(t *testing.T, base string, rev int64) pageState {
	var st pageState
	if err := json.Unmarshal([]byte(get(t, base+"/ui/state?rev="+strconv.FormatInt(rev, 10))), &st); err != nil {
		t.Error(err)
	}
	return st
}

func get(t *testing.T, u string) string {
	resp, err := http.Get(u)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func post(t *testing.T, u, body string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", u, resp.Status, b)
	}
}

// TestPageShowsADirectMessageAsOne: a direct message the bot opens with
// the page's user is listed under the bot's name and marked as a direct
// message, never as a "#" channel named after its id ("du0webuser").
func TestPageShowsADirectMessageAsOne(t *testing.T) {
	s, err := slackstub.Listen("127.0.0.1:0", "web-test-secret")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetWeb(slackstub.WebConfig{User: "U0WEBUSER", Channels: []slackstub.WebChannel{{ID: "C0WEB", Name: "web"}}})
	api := slack.New("xoxb-web", slack.OptionAPIURL(s.APIURL()))
	dm := slackstub.DMChannel("U0WEBUSER")
	if _, _, err := api.PostMessage(dm, slack.MsgOptionText("only for you", false)); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Channels []struct {
			ID, Name string
			DM       bool `json:"dm"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(get(t, s.URL()+"/ui/state?rev=-1")), &st); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Channels {
		if c.ID == dm {
			if !c.DM || c.Name != "dlqbot" {
				t.Fatalf("the direct message shows as %+v, want dlqbot's, marked dm", c)
			}
			return
		}
	}
	t.Fatalf("no direct message on the page: %+v", st.Channels)
}
