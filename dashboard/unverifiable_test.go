package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
)

// listedBackend is fakeBackend listing more replays after the running one.
type listedBackend struct {
	*fakeBackend
	more []engine.Replay
}

func (l *listedBackend) Replays(ctx context.Context, p commands.Principal, n int) ([]engine.Replay, error) {
	rs, err := l.fakeBackend.Replays(ctx, p, n)
	return append(rs, l.more...), err
}

// TestUnverifiableReplayIsMarkedInTheList: a record the store could not
// check is a row of its own, marked unverifiable, beside the others.
func TestUnverifiableReplayIsMarkedInTheList(t *testing.T) {
	t.Parallel()
	b := &listedBackend{fakeBackend: &fakeBackend{}, more: []engine.Replay{{ID: "r_unverifiable01", Unverifiable: true}}}
	d, err := New(Config{Policy: testPolicy(t)}, Deps{Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	h := d.Handler()
	page := get(h, "http://dlqbot.test/dashboard/", signIn(t, h, tokOps))
	body := page.Body.String()
	if page.Code != http.StatusOK || !strings.Contains(body, running.ID) ||
		!strings.Contains(body, `data-replay="r_unverifiable01" data-state="unverifiable"`) {
		t.Fatalf("status %d, want both rows, the second marked unverifiable:\n%s", page.Code, body)
	}
}
