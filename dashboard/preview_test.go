package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// previewBackend answers for one replay record and the card of the
// preview it was approved from.
type previewBackend struct {
	*recordBackend
	card *engine.PreviewCard
}

func (b *previewBackend) Preview(ctx context.Context, p commands.Principal, id string) (*engine.PreviewCard, error) {
	if _, err := b.Replay(ctx, p, id); err != nil {
		return nil, err
	}
	return b.card, nil
}

// previewPage renders the page of a replay whose preview kept card.
func previewPage(t *testing.T, card *engine.PreviewCard) string {
	t.Helper()
	r := engine.Replay{ID: "r_preview0000001", DLQ: "orders.dlq", State: engine.StateRunning, Step: 1, Total: 50, Sent: 10}
	b := &previewBackend{recordBackend: &recordBackend{fakeBackend: &fakeBackend{}, r: r}, card: card}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	return get(h, "http://dlqbot.test/dashboard/replays/"+r.ID, signIn(t, h, tokViewer)).Body.String()
}

// TestReplayPageShowsUnchangedConsumersFirst: the replay's page shows,
// above its steps, what its preview found: the consumers that were not
// restarted since the failures first among the problems, in Slack's
// words, then the targets with their verdicts.
func TestReplayPageShowsUnchangedConsumersFirst(t *testing.T) {
	t.Parallel()
	failed := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	conns := []engine.ConsumerConn{{ConnectedAt: failed.Add(-time.Hour)}, {ConnectedAt: failed.Add(-time.Hour)}, {ConnectedAt: failed.Add(-2 * time.Hour)}}
	card := &engine.PreviewCard{
		Problems: []engine.Problem{
			{Kind: engine.ProblemConsumersUnchanged, Queue: "orders", Messages: 50, Detail: "orders: its 3 consumers have been connected since before these messages failed (the latest at 2026-12-06T07:00:00Z) — is the fix deployed?"},
			{Kind: engine.ProblemNoConsumers, Queue: "audit", Messages: 2, Detail: "target queue audit has no consumers now: its 2 message(s) would wait there unprocessed"},
		},
		Targets: []engine.TargetView{
			{Queue: "audit", Exists: true, Messages: 2, ConsumersSinceFailure: engine.SinceNone},
			{Queue: "orders", Exists: true, Consumers: 3, Messages: 50, ConsumersSinceFailure: engine.SinceUnchanged, LastFailure: failed, ConsumerConns: conns},
		},
	}
	body := previewPage(t, card)
	unchanged := strings.Index(body, `<li class="pr pr-consumers_unchanged" data-kind="consumers_unchanged"><strong>Consumers not restarted</strong> — orders: its 3 consumers have been connected since before these messages failed (the latest at 2026-12-06T07:00:00Z) — is the fix deployed?</li>`)
	none := strings.Index(body, `data-kind="no_consumers"`)
	steps := strings.Index(body, "<h2>Steps")
	if unchanged < 0 || none < 0 || unchanged > none || steps < unchanged {
		t.Fatalf("want the unchanged consumers first among the problems, above the steps (at %d, %d, steps %d):\n%s", unchanged, none, steps, body)
	}
	for _, want := range []string{
		`<tr data-target="orders"><td><code>orders</code></td><td class="num">50</td><td class="num">3</td><td class="since since-unchanged">unchanged</td><td>2026-12-06 07:00:00Z</td><td>2026-12-06 05:00:00Z, 2026-12-06 06:00:00Z</td></tr>`,
		`<td class="since since-none">none</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the targets lack %s:\n%s", want, body)
		}
	}
	if strings.Index(body, `data-target="orders"`) > strings.Index(body, `data-target="audit"`) {
		t.Error("the target with consumers not restarted is not listed first")
	}
}

// TestReplayPageShowsNoProblemsOfACleanPreview: a preview that found no
// problems shows none, and its target's verdict.
func TestReplayPageShowsNoProblemsOfACleanPreview(t *testing.T) {
	t.Parallel()
	failed := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	body := previewPage(t, &engine.PreviewCard{Targets: []engine.TargetView{{Queue: "orders", Exists: true, Consumers: 1, Messages: 50,
		ConsumersSinceFailure: engine.SinceRestarted, LastFailure: failed, ConsumerConns: []engine.ConsumerConn{{ConnectedAt: failed.Add(time.Minute)}}}}})
	if strings.Contains(body, `class="pr `) || !strings.Contains(body, `<li class="dim">No problems.</li>`) {
		t.Fatalf("a preview without problems shows some:\n%s", body)
	}
	if !strings.Contains(body, `<p class="verdict" id="verdict" data-problems="0"><strong>Safe to replay</strong></p>`) {
		t.Fatalf("a preview without problems is not headed safe to replay:\n%s", body)
	}
	if !strings.Contains(body, `<td class="since since-restarted">restarted</td>`) {
		t.Fatalf("the target's verdict is not shown:\n%s", body)
	}
	if body := previewPage(t, nil); !strings.Contains(body, "What its preview found is not kept (any more).") || strings.Contains(body, `id="problems"`) {
		t.Fatalf("a replay whose token keeps no card:\n%s", body)
	}
}

// TestReplayPageCountsStillArrivingAsAProblem: a preview whose failures
// were still arriving is headed with one problem, as Slack's card and the
// terminal count it, lists it among the problems and never says "No
// problems."
func TestReplayPageCountsStillArrivingAsAProblem(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 9, 30, 0, 0, time.UTC)
	body := previewPage(t, &engine.PreviewCard{
		Targets: []engine.TargetView{{Queue: "orders", Exists: true, Consumers: 1, Messages: 50, ConsumersSinceFailure: engine.SinceRestarted}},
		Arrivals: &engine.Arrivals{Start: now.Add(-time.Hour), Bucket: 5 * time.Minute, Now: now, RecentWindow: engine.ArrivalsRecent,
			ArrivalRow: engine.ArrivalRow{Messages: 50, Recent: 3, Counts: make([]int, 12)}},
	})
	for _, want := range []string{
		`<p class="verdict warn" id="verdict" data-problems="1"><strong>1 problem</strong></p>`,
		`<li class="pr pr-still_arriving" data-kind="still_arriving"><strong>Still arriving</strong> — 3 in the last 5 min: the cause may not be fixed yet.</li>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "No problems.") {
		t.Errorf("a preview whose failures were still arriving says No problems.:\n%s", body)
	}
}

// TestReplayPageFlagsMixedScriptTarget: a target whose name mixes Cyrillic
// and Latin letters is flagged in the page's targets; a plain one is
// not.
func TestReplayPageFlagsMixedScriptTarget(t *testing.T) {
	t.Parallel()
	body := previewPage(t, &engine.PreviewCard{Targets: []engine.TargetView{
		{Queue: "orders", Exists: true, Consumers: 1, Messages: 1, ConsumersSinceFailure: engine.SinceRestarted},
		{Queue: "\u043erders", Exists: true, Consumers: 1, Messages: 1, ConsumersSinceFailure: engine.SinceRestarted}, // Cyrillic о
	}})
	if !strings.Contains(body, "<td><code>\u043erders</code> <span class=\"warn\">mixes Cyrillic and Latin letters: check the name</span></td>") {
		t.Errorf("the look-alike target is not flagged:\n%s", body)
	}
	if !strings.Contains(body, "<td><code>orders</code></td>") || strings.Count(body, "mixes ") != 1 {
		t.Errorf("want only the look-alike flagged:\n%s", body)
	}
}
