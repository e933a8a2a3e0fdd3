package blocks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// The person named in the fixtures' exception texts.
var personal = []string{"John Roe", "john.roe@example.com", "diagnosis"}

// previewManyTargets is a preview bound for 14 queues, one of whose names
// mixes a Cyrillic letter into Latin ones and one longer than a channel
// line shows.
func previewManyTargets() *engine.Preview {
	p := previewWithProblems()
	p.Targets = nil
	for i := range 12 {
		p.Targets = append(p.Targets, engine.TargetView{Queue: fmt.Sprintf("orders.shard-%02d", i), Exists: true, Consumers: 2, Messages: 20 - i})
	}
	p.Targets = append(p.Targets,
		engine.TargetView{Queue: "\u043erders", Exists: true, Consumers: 1, Messages: 1}, // Cyrillic о
		engine.TargetView{Queue: "billing." + strings.Repeat("x", 140), Exists: true, Consumers: 1, Messages: 1})
	return p
}

// TestChannelViewsShowNoExceptionText: every rendering a channel sees
// (the preview post, a follow-up check in the thread, the activity
// lines) names a failure by its type and id only; the private views (the
// reader's samples and the check command's answer) show its text.
func TestChannelViewsShowNoExceptionText(t *testing.T) {
	p := previewArrivals()
	c := checkWithGroups()
	channel := map[string]string{
		"preview":        string(marshal(t, rendered(Preview(p, fixedNow())))),
		"approved":       string(marshal(t, rendered(PreviewApproved(p, approver, replayID)))),
		"details":        string(marshal(t, rendered(PreviewDetails(p)))),
		"follow-up":      string(marshal(t, rendered(Check(c, ChannelView)))),
		"activity check": ActivityCheck(c),
		"alert":          string(marshal(t, rendered(Alert(alertWithTexts())))),
	}
	for name, s := range channel {
		for _, l := range personal {
			if strings.Contains(s, l) {
				t.Errorf("the channel's %s shows %q:\n%s", name, l, s)
			}
		}
	}
	if !strings.Contains(channel["alert"], "java.lang.IllegalArgumentException") || !strings.Contains(channel["alert"], p.Arrivals.Groups[1].GroupID) {
		t.Errorf("the alert does not name the group by its type and id:\n%s", channel["alert"])
	}
	for _, name := range []string{"preview", "details"} {
		if !strings.Contains(channel[name], "java.lang.IllegalArgumentException") || !strings.Contains(channel[name], p.Arrivals.Groups[1].GroupID) {
			t.Errorf("the %s does not name the group by its type and id:\n%s", name, channel[name])
		}
	}
	if !strings.Contains(channel["follow-up"], "com.acme.KycException") || !strings.Contains(channel["follow-up"], engine.GroupID(c.Groups[1].Group)) {
		t.Errorf("the follow-up does not name the group by its type and id:\n%s", channel["follow-up"])
	}
	private := map[string]string{
		"samples": string(marshal(t, rendered(Samples(p)))),
		"check":   string(marshal(t, rendered(Check(c, PrivateView)))),
	}
	for name, s := range private {
		for _, l := range personal[:2] {
			if !strings.Contains(s, l) {
				t.Errorf("the reader's %s does not show %q:\n%s", name, l, s)
			}
		}
	}
}

// TestTargetsCutSayMore: a channel post names the targets with a concern
// (here a name mixing scripts) and counts the other 13; the reader's
// private answer lists every one, names quoted whole, and flags a name
// mixing scripts in both.
func TestTargetsCutSayMore(t *testing.T) {
	p := previewManyTargets()
	post := string(marshal(t, rendered(Preview(p, fixedNow()))))
	if !strings.Contains(post, "13 other target queues have consumers — *Show samples* lists every target") ||
		!strings.Contains(post, "mixes Latin and Cyrillic") && !strings.Contains(post, "mixes Cyrillic and Latin") {
		t.Errorf("the post does not count the 13 other targets, or does not flag the mixed name:\n%s", post)
	}
	if strings.Contains(post, "orders.shard-00") {
		t.Errorf("the post names a target without a concern among 14:\n%s", post)
	}
	if !HasSamples(p) || !strings.Contains(post, ActionSamples) {
		t.Errorf("the post offers no private list of its targets")
	}
	priv := string(marshal(t, rendered(Samples(p))))
	for _, tv := range p.Targets {
		if !strings.Contains(priv, tv.Queue) {
			t.Errorf("the private list lacks %q", tv.Queue)
		}
	}
	if !strings.Contains(priv, `\u043erders`) {
		t.Errorf("the private list does not quote the mixed name:\n%s", priv)
	}
}

// alertWithTexts is an open alert whose groups still carry their texts,
// as if whoever kept them had not left them out: the alert shows ids and
// types all the same.
func alertWithTexts() ops.Alert {
	a := watchAlert(ops.AlertOpen)
	arr := *previewArrivals().Arrivals
	a.Seen = &arr
	return a
}
