package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// A replay that finished with copies back is not a green finish: its badge
// is the verdict; a clean finish says so.
func TestFinishedBadgeShowsTheVerdict(t *testing.T) {
	t.Parallel()
	back := engine.Replay{ID: "r_cameback000001", DLQ: "orders.dlq", State: engine.StateFinished, Total: 32, Sent: 32, Settled: 32, Returned: 12}
	clean := engine.Replay{ID: "r_clean000000001", DLQ: "orders.dlq", State: engine.StateFinished, Total: 4, Sent: 4, Settled: 4}
	b := &listedBackend{fakeBackend: &fakeBackend{}, more: []engine.Replay{back, clean}}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	page := get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokOps))
	body := page.Body.String()
	row := func(id string) string {
		_, rest, _ := strings.Cut(body, `data-replay="`+id+`"`)
		r, _, _ := strings.Cut(rest, "</tr>")
		return r
	}
	if page.Code != http.StatusOK {
		t.Fatalf("status %d", page.Code)
	}
	if r := row(back.ID); !strings.Contains(r, `class="state st-came_back"`) || !strings.Contains(r, "finished · 12 came back") || strings.Contains(r, "st-finished") {
		t.Errorf("finished with returns shows as:\n%s", r)
	}
	if r := row(clean.ID); !strings.Contains(r, `class="state st-finished"`) || !strings.Contains(r, "finished clean") {
		t.Errorf("clean finish shows as:\n%s", r)
	}
}

// recordBackend answers for one replay record.
type recordBackend struct {
	*fakeBackend
	r engine.Replay
}

func (b *recordBackend) Replay(_ context.Context, _ commands.Principal, id string) (engine.Replay, error) {
	if id != b.r.ID {
		return engine.Replay{}, errors.New("there is no such replay")
	}
	return b.r, nil
}

// The replay's page shows the record's numbers under the glossary's
// words, new failures named by their window (during the replay), as the
// card and the terminal's status do.
func TestReplayPageShowsTheRecordsNumbers(t *testing.T) {
	t.Parallel()
	r := engine.Replay{ID: "r_numbers0000001", DLQ: "orders.dlq", State: engine.StateStopped, Step: 1, Total: 40, Sent: 10, Settled: 10, Returned: 3, NewFailures: 2}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: &recordBackend{fakeBackend: &fakeBackend{}, r: r}})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	page := get(h, "http://dlqbot.test/dashboard/replays/"+r.ID, signIn(t, h, tokOps))
	body := page.Body.String()
	for _, want := range []string{
		`<dt>sent</dt><dd id="sent">10</dd>`,
		`<dt>settled</dt><dd id="settled">10</dd>`,
		`<dt>came back</dt><dd id="returned">3</dd>`,
		`<dt>new failures during the replay</dt><dd id="new_failures">2</dd>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the replay's page lacks %s:\n%s", want, body)
		}
	}
}

// followUpBackend answers for the running replay with one follow-up check.
type followUpBackend struct {
	*fakeBackend
	check engine.CheckReport
}

func (b *followUpBackend) Events(context.Context, commands.Principal, string) ([]string, []engine.Event, error) {
	return []string{"1-0"}, []engine.Event{{Kind: engine.EventFollowUp, Replay: running, Check: &b.check}}, nil
}

// A follow-up check whose read met messages another replay's read held
// shows what it saw back so far and what it did not read, naming the
// replay, never "0 of 10 came back"; one that read everything says came
// back.
func TestAFollowUpBesideAReplayNamesWhatItDidNotRead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		held      *engine.HeldBy
		want, not string
	}{
		{&engine.HeldBy{Replays: []string{"r_other0000000001"}, Messages: 1700}, "0 of 10 seen back so far; not read: 1700 held by replay r_other0000000001", "came back"},
		{nil, "0 of 10 came back;", "not read"},
	} {
		b := &followUpBackend{fakeBackend: &fakeBackend{}, check: engine.CheckReport{ReplayID: running.ID, Label: "+5m", Replayed: 10, HeldByReplay: c.held}}
		d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: b})
		if err != nil {
			t.Fatal(err)
		}
		h := d.Handler()
		body := get(h, "http://dlqbot.test/dashboard/replays/"+running.ID, signIn(t, h, tokOps)).Body.String()
		_, rows, _ := strings.Cut(body, `id="followups"`)
		rows, _, _ = strings.Cut(rows, "</table>")
		if !strings.Contains(rows, c.want) || strings.Contains(rows, c.not) {
			t.Errorf("held by %+v: the follow-ups read\n%s\nwant %q, not %q", c.held, rows, c.want, c.not)
		}
	}
}
