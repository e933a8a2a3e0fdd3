package blocks

import (
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// frozenOf is the token header the engine freezes for p, with its card.
func frozenOf(p *engine.Preview) engine.Frozen {
	return engine.Frozen{Token: p.Token, DLQ: p.DLQ.Name, Selection: p.Selection, Requester: p.Requester,
		Total: p.Selected, Distinct: p.Distinct, Card: engine.CardOf(p)}
}

// A replica that did not post the preview renders the replay's status from
// the token's card exactly as the replica that posted it does from its
// message: the same headline, problems, failure groups and targets, and
// of a group only its id, type and counts.
func TestTheFrozenCardRendersThePostedPreview(t *testing.T) {
	stopped, _ := stoppedReplay()
	links := ReplayLinks("https://acme.slack.com", "C0123456789", "1700000000.000100", "", replayID)
	for name, p := range map[string]*engine.Preview{"arrivals": previewArrivals(), "problems": previewWithProblems(), "unchanged": previewUnchanged()} {
		posted, _ := Preview(p, fixedNow())
		want := string(marshal(t, rendered(PreviewStatus(Approved(posted, approver, replayID), stopped, links))))
		got := string(marshal(t, rendered(PreviewStatus(FrozenPreview(frozenOf(p)), stopped, links))))
		if got != want {
			t.Errorf("%s: the status rendered from the token differs from the posted preview's:\n%s\nwant\n%s", name, got, want)
		}
	}
	card := engine.CardOf(previewArrivals())
	for _, g := range card.Arrivals.Groups {
		if g.Key != "" {
			t.Errorf("the card keeps group %s's text %q", g.GroupID, g.Key)
		}
	}
	raw := string(marshal(t, rendered(PreviewStatus(FrozenPreview(frozenOf(previewArrivals())), stopped, links))))
	for _, l := range personal {
		if strings.Contains(raw, l) {
			t.Errorf("the status rendered from the token shows %q", l)
		}
	}
	for _, want := range []string{"java.lang.IllegalArgumentException", previewArrivals().Arrivals.Groups[1].GroupID, "Target queue missing"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the status rendered from the token lacks %q:\n%s", want, raw)
		}
	}
}
