package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// One replay with copies that came back shows one number per quantity on
// every screen: its JSON document, the terminal's readable status, the
// Slack card and outcome line (rendered from the same record), and check
// (JSON and readable) agree on sent, came back and settled. New failures
// are counted over two windows, each named where it is shown: a failure
// dead-lettered after the replay stopped is none of the replay's "new
// failures during the replay", and one of check's "new failures since the
// replay began".
func TestOneNumberPerQuantityAcrossScreens(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(8, 100)...)
	r.WaitCount(dlq, 8, 20*time.Second)
	consumer := r.Consume(src, func(amqp.Delivery) string { return "reject" })
	doc := replayJSON(t, env, dlq, 1)
	id, _ := doc["replay_id"].(string)
	if doc["verdict"] != "came_back" || id == "" {
		t.Fatalf("want a replay whose copies came back: %v", doc)
	}

	// A failure that is not the replay's, after it stopped.
	r.Publish(src, testkit.Msg("late-failure", []byte("late"), nil))
	testkit.Eventually(t, 20*time.Second, "the late message rejected", func() bool { _, rej := consumer.Counts(); return rej > int(num(t, doc, "sent")) })

	out, stderr, code := dlqbot(t, env, "status", id, "--json")
	if code != 0 {
		t.Fatalf("status --json exit %d:\n%s\n%s", code, out, stderr)
	}
	var rec engine.Replay
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	sent, settled, back, during := rec.Sent, rec.Settled, rec.Returned, rec.NewFailures
	if sent == 0 || back == 0 || settled > sent || back > sent {
		t.Fatalf("the record: %d sent, %d settled, %d came back: want some sent and some back", sent, settled, back)
	}
	if during != 0 {
		t.Fatalf("the replay counts %d new failures during it; none was dead-lettered then", during)
	}
	type shown struct{ screen, quantity, got, want string }
	var all []shown
	see := func(screen, quantity string, got, want int) {
		all = append(all, shown{screen, quantity, strconv.Itoa(got), strconv.Itoa(want)})
	}
	see("status --json", "sent", int(num(t, doc, "sent")), sent)
	see("status --json", "came back", int(num(t, doc, "returned")), back)

	// The terminal's readable status.
	out, _, _ = dlqbot(t, env, "status", id)
	see("status", "sent", grab(t, out, `sent (\d+) of`), sent)
	see("status", "settled", grab(t, out, `settled (\d+)`), settled)
	see("status", "came back", grab(t, out, `came back (\d+)`), back)
	see("status", "new failures during the replay", grab(t, out, `new failures during the replay (\d+)`), during)

	// The Slack card and the outcome line (the preview's status line, the
	// thread's last line and the channel's outcome line).
	card := fieldTexts(blocks.ProgressAs("/dlq", rec, nil))
	see("card", "sent", grab(t, card, `\*Sent\*\n(\d+)`), sent)
	see("card", "settled", grab(t, card, `\*Settled\*\n(\d+)`), settled)
	see("card", "came back", grab(t, card, `\*Came back\*\n(\d+)`), back)
	line := blocks.Outcome(rec)
	see("outcome line", "came back", grab(t, line, `(\d+) of \d+ came back`), back)
	see("outcome line", "sent", grab(t, line, `\d+ of (\d+) came back`), sent)

	// check, in JSON and readable: the same sent and came back; its new
	// failures are since the replay began, up to now.
	out, stderr, code = dlqbot(t, env, "check", id, "--json")
	if code != 0 {
		t.Fatalf("check --json exit %d:\n%s\n%s", code, out, stderr)
	}
	var c engine.CheckReport
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out)
	}
	see("check --json", "sent", c.Replayed, sent)
	see("check --json", "came back", c.Returned, back)
	see("check --json", "new failures since the replay began", c.NewFailures, 1)
	out, _, _ = dlqbot(t, env, "check", id)
	see("check", "sent", grab(t, out, `of (\d+) message\(s\) sent`), sent)
	see("check", "came back", grab(t, out, `(\d+) came back to`), back)
	see("check", "new failures since the replay began", grab(t, out, `New failures since the replay began[^:]*: (\d+)`), 1)

	for _, s := range all {
		if s.got != s.want {
			t.Errorf("%s shows %s %s; the replay's record says %s", s.screen, s.quantity, s.got, s.want)
		}
	}
	if t.Failed() {
		t.Logf("status --json: %+v", rec)
	}
}

// num is a JSON document's number field.
func num(t *testing.T, doc map[string]any, field string) float64 {
	t.Helper()
	v, ok := doc[field].(float64)
	if !ok {
		t.Fatalf("no number %q in %v", field, doc)
	}
	return v
}

// grab is the number re's first group matches in s.
func grab(t *testing.T, s, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(strings.ReplaceAll(s, ",", ""))
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, s)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// fieldTexts is the text of a card's section blocks and their fields.
func fieldTexts(bl []slack.Block, _ string) string {
	var b strings.Builder
	for _, x := range bl {
		if s, ok := x.(*slack.SectionBlock); ok {
			if s.Text != nil {
				fmt.Fprintln(&b, s.Text.Text)
			}
			for _, f := range s.Fields {
				fmt.Fprintln(&b, f.Text)
			}
		}
	}
	return b.String()
}
