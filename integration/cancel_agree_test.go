package integration_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestACancelMidStepShowsOneCameBackEverywhere: a replay approved in Slack
// is cancelled while step 1 settles, its 10 copies held by a consumer that
// takes one at a time and rejects each only once the cancel is shown; they
// come back after the cancel. Once the copies' grace has passed (the run
// says the cancel again), the progress card, the dashboard's replay page,
// the API's check and Slack's /dlq check say the same number came back:
// the copies of this replay the DLQ holds, drained and counted. Through a
// tap and by re-reading the DLQ.
func TestACancelMidStepShowsOneCameBackEverywhere(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"tap", "reread"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cancelMidStepInSlack(t, mode == "tap")
		})
	}
}

func cancelMidStepInSlack(t *testing.T, tapped bool) {
	const n = 30
	e := newDashEnvWith(t, options{taps: tapped})
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	if tapped {
		e.rabbit.DLXTopology(src, dlq, nil)
	} else {
		e.rabbit.Topology(src, dlq, nil)
	}
	e.rabbit.Reject(src, testkit.Msgs(n, 200)...)
	e.rabbit.WaitCount(dlq, n, 20*time.Second)
	open := make(chan struct{})
	rejected := gatedRejecter(t, e.rabbit, src, open)

	e.command("U0ALICE001", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.click("U0BOB00001", blocks.ActionApprove, token, preview.TS)
	var id string
	testkit.Eventually(t, 30*time.Second, "step 1 sent, its copies waiting in the target", func() bool {
		rs := e.replays()
		if len(rs) != 1 || rs[0].Sent != 10 || e.rabbit.Count(src) != 9 {
			return false
		}
		id = rs[0].ID
		return true
	})
	var prog string
	testkit.Eventually(t, 20*time.Second, "the progress card's Cancel button", func() bool {
		m, ok := e.progress(preview.TS)
		prog = m.TS
		return ok && buttonValue(m.RawBlocks, blocks.ActionCancel) == id
	})
	e.click("U0BOB00001", blocks.ActionCancel, id, prog)
	testkit.Eventually(t, 20*time.Second, "the cancel in the thread", func() bool {
		return len(cancelLines(e.replies(preview.TS))) >= 1
	})
	if r := e.replays()[0]; r.State != engine.StateCancelled || r.Sent != 10 || r.Returned != 0 {
		t.Fatalf("at the cancel the record is %s with %d sent, %d back: want cancelled mid-step 1 with none back yet", r.State, r.Sent, r.Returned)
	}
	close(open) // the copies come back now, after the cancel

	testkit.Eventually(t, 30*time.Second, "the consumer rejecting step 1's 10 copies into the DLQ", func() bool {
		return rejected.Load() == 10 && e.rabbit.Count(dlq) == n
	})
	// The grace has passed once the run says the cancel again, with what
	// came back; the card follows within its edit interval. A run that
	// never says it is compared all the same, for what each screen shows.
	for deadline := time.Now().Add(90 * time.Second); len(cancelLines(e.replies(preview.TS))) < 2; {
		if time.Now().After(deadline) {
			t.Errorf("the run did not say the cancel again within 90 s of the copies' return")
			break
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	rec := e.replays()[0]
	cardBack := func() (int, string) {
		m, _ := e.progress(preview.TS)
		c := m.Content()
		if !strings.Contains(c, "Cancelled") {
			return -1, c
		}
		g := regexp.MustCompile(`\*Came back\*\n(\d+)`).FindStringSubmatch(c)
		if g == nil {
			return -1, c
		}
		return atoi(g[1]), c
	}
	var card int
	var cardText string
	for deadline := time.Now().Add(20 * time.Second); ; {
		if card, cardText = cardBack(); card == rec.Returned || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling interval: the card is edited at most once a second
	}
	page := newDashClient(t, e.url, tokRunbook).get("/dashboard/replays/"+id, http.StatusOK)
	dash := grab(t, page, `<dd id="returned">(\d+)</dd>`)
	check := e.call(http.StatusOK, tokRunbook, "POST", "/api/v1/replays/"+id+"/check", nil)
	apiBack, _ := check["returned"].(float64)
	e.command("U0BOB00001", "check "+id)
	slackCheck := e.waitEphemeral("U0BOB00001", 1).Text
	slackBack := grab(t, slackCheck, `(\d+) of \d+ sent came back`)

	// What the DLQ holds: the 20 never sent and the copies that came back.
	var copies, originals int
	for _, d := range e.rabbit.Drain(dlq, 0, 2*time.Second) {
		if rid, _ := d.Headers["x-replay-id"].(string); rid == id {
			copies++
		} else {
			originals++
		}
	}
	if copies != 10 || originals != n-10 {
		t.Errorf("the DLQ held %d copies of %s and %d others, want 10 and %d", copies, id, originals, n-10)
	}
	for _, x := range []struct {
		screen string
		got    int
	}{{"the record", rec.Returned}, {"the progress card", card}, {"the dashboard's page", dash},
		{"the API's check", int(apiBack)}, {"Slack's /dlq check", slackBack}} {
		if x.got != copies {
			t.Errorf("%s says %d came back; the DLQ holds %d copies of %s", x.screen, x.got, copies, id)
		}
	}
	t.Logf("came back: record %d, card %d, dashboard %d, API check %d, Slack check %d; the DLQ held %d copies; cancel lines %q",
		rec.Returned, card, dash, int(apiBack), slackBack, copies, cancelLines(e.replies(preview.TS)))
	if t.Failed() {
		t.Logf("card:\n%s\nSlack check: %s", cardText, slackCheck)
	}
}

// cancelLines are the thread's cancel lines among lines.
func cancelLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "Cancelled:") {
			out = append(out, l)
		}
	}
	return out
}

// gatedRejecter consumes queue one delivery at a time (prefetch 1) and
// rejects each once open is closed: until then what is sent to queue
// stays there, but the one delivery held, and a replay's step cannot
// settle. It returns how many it rejected.
func gatedRejecter(t *testing.T, r *testkit.Rabbit, queue string, open <-chan struct{}) *atomic.Int64 {
	t.Helper()
	ch := r.Channel()
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, testkit.Name("gated"), false, false, false, false, nil)
	if err != nil {
		t.Fatal(fmt.Errorf("consume %s: %w", queue, err))
	}
	var rejected atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			select {
			case <-open:
			case <-stop:
				return
			}
			_ = d.Reject(false)
			rejected.Add(1)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		_ = ch.Close()
		<-done
	})
	return &rejected
}
