package integration_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/ops"
)

// TestSlackShowsOneNumberPerQuantity: a replay whose copies come back (a
// rejecting consumer) shows in Slack the numbers its record holds: the
// progress card, the thread's step lines (summed over the steps), the
// channel's outcome line and check agree on sent, settled and came back.
// (The terminal's printer is held to the same record in
// cmd/dlqbot/numbers_test.go, the dashboard's page in dashboard.)
func TestSlackShowsOneNumberPerQuantity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	src, dlq := dlqWith(e, 6)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "reject" })
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	var rec engine.Replay
	testkit.Eventually(t, time.Minute, "the replay to stop on what came back", func() bool {
		rs := e.replays()
		if len(rs) == 1 && rs[0].State == engine.StateStopped {
			rec = rs[0]
		}
		return rec.ID != ""
	})
	if rec.Returned == 0 || rec.Sent == 0 {
		t.Fatalf("want a stop with copies back: %+v", rec)
	}
	card := e.waitProgress(preview.TS, "Stopped", 20*time.Second).Content()
	var outcome string
	testkit.Eventually(t, 20*time.Second, "the outcome line in the channel", func() bool {
		for _, m := range e.stub.Messages(channel) {
			if m.TS != preview.TS && strings.Contains(m.Text, rec.ID) && strings.Contains(m.Text, "came back") {
				outcome = m.Text
			}
		}
		return outcome != ""
	})
	// The step lines: one "— a sent, b settled, c came back" per step.
	steps := regexp.MustCompile(`[Ss]tep (\d+)[^—]*— (\d+) sent, (\d+) settled, (\d+) came back`)
	seen := map[string][3]int{}
	for _, line := range e.replies(preview.TS) {
		for _, m := range steps.FindAllStringSubmatch(line, -1) {
			seen[m[1]] = [3]int{atoi(m[2]), atoi(m[3]), atoi(m[4])}
		}
	}
	var sum [3]int
	for _, v := range seen {
		sum[0], sum[1], sum[2] = sum[0]+v[0], sum[1]+v[1], sum[2]+v[2]
	}
	c, err := e.ops.Check(context.Background(), ops.TerminalCaller(e.ops.Policy(), "oncall"), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		screen, quantity string
		got, want        int
	}{
		{"card", "sent", grab(t, card, `\*Sent\*\n(\d+)`), rec.Sent},
		{"card", "settled", grab(t, card, `\*Settled\*\n(\d+)`), rec.Settled},
		{"card", "came back", grab(t, card, `\*Came back\*\n(\d+)`), rec.Returned},
		{"step lines", "sent", sum[0], rec.Sent},
		{"step lines", "settled", sum[1], rec.Settled},
		{"step lines", "came back", sum[2], rec.Returned},
		{"outcome line", "came back", grab(t, outcome, `(\d+) of \d+ came back`), rec.Returned},
		{"outcome line", "sent", grab(t, outcome, `\d+ of (\d+) came back`), rec.Sent},
		{"check", "sent", c.Replayed, rec.Sent},
		{"check", "came back", c.Returned, rec.Returned},
	} {
		if x.got != x.want {
			t.Errorf("%s shows %s %d; the replay's record says %d", x.screen, x.quantity, x.got, x.want)
		}
	}
	if len(seen) == 0 || t.Failed() {
		t.Errorf("steps %v; record %+v\ncard:\n%s\noutcome: %s\nthread: %q", seen, rec, card, outcome, e.replies(preview.TS))
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// grab is the number re's first group matches in s.
func grab(t *testing.T, s, re string) int {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(strings.ReplaceAll(s, ",", ""))
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, s)
	}
	return atoi(m[1])
}
