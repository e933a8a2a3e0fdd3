package blocks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// cardLines measures a message's height in lines of text: one for each
// block, plus each line break in its section, field and context texts.
func cardLines(bs []slack.Block) int {
	n := 0
	for _, b := range bs {
		n++
		switch x := b.(type) {
		case *slack.SectionBlock:
			if x.Text != nil {
				n += strings.Count(x.Text.Text, "\n")
			}
			for _, f := range x.Fields {
				n += strings.Count(f.Text, "\n")
			}
		case *slack.ContextBlock:
			for _, el := range x.ContextElements.Elements {
				if tx, ok := el.(*slack.TextBlockObject); ok {
					n += strings.Count(tx.Text, "\n")
				}
			}
		}
	}
	return n
}

// TestPreviewCardIsShort: a typical preview (two failure groups, one
// still arriving; three targets, one missing and one without consumers)
// fits in twelve lines and still says what a replay would do: how many,
// from where, to how many targets, what is missing, what has no
// consumers, each group by count, type and id, and who asked.
func TestPreviewCardIsShort(t *testing.T) {
	p := previewArrivals()
	bs, _ := Preview(p, fixedNow())
	if n := cardLines(bs); n > 12 {
		t.Errorf("the card is %d lines, want at most 12:\n%s", n, marshal(t, rendered(bs, "")))
	}
	card := string(marshal(t, rendered(bs, "")))
	for _, want := range []string{
		"48 messages from `orders.dlq` to 3 target queues",
		"*Still arriving*",
		"`payments.settle` does not exist",
		"`billing.retry` has *no consumers*",
		"`orders.created` has consumers",
		"*45* × `rejected` · group `" + p.Arrivals.Groups[0].GroupID + "`",
		"*21* × `java.lang.IllegalArgumentException` · group `" + p.Arrivals.Groups[1].GroupID + "` · :red_circle: still arriving",
		"requested by \\u003c@U0SUPPORT1", // context text is HTML-escaped in JSON
		ActionDetails,
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the card lacks %q:\n%s", want, card)
		}
	}
	// Mechanics and per-target figures are behind Details.
	for _, not := range []string{"Spring's recoverer", "(30 rejected, 10 expired)", "2 consumers", "first <!date"} {
		if strings.Contains(card, not) {
			t.Errorf("the card carries %q, which the details hold:\n%s", not, card)
		}
	}
	details := string(marshal(t, rendered(PreviewDetails(p))))
	for _, want := range []string{"Spring's recoverer", "(30 rejected, 10 expired)", "2 consumers", "`···▁█▆▃▂▁···············` *45*"} {
		if !strings.Contains(details, want) {
			t.Errorf("the details lack %q:\n%s", want, details)
		}
	}
	// Already replayed is a problem the card keeps.
	if card := string(marshal(t, rendered(Preview(previewWithProblems(), fixedNow())))); !strings.Contains(card, "*Already replayed* — 4 messages") {
		t.Errorf("the card does not say 4 were already replayed:\n%s", card)
	}
}

// TestCardGroupsAndTargetsInOneLine: with every target consuming, the
// card says so on one line naming them; with more failure groups than it
// lists, it lists maxCardGroups and counts the messages of the rest.
func TestCardGroupsAndTargetsInOneLine(t *testing.T) {
	p := previewArrivals()
	p.Problems = nil
	for i := range p.Targets {
		p.Targets[i].Exists, p.Targets[i].Consumers = true, 1
	}
	for i := range 3 {
		p.Arrivals.Groups = append(p.Arrivals.Groups, engine.ArrivalRow{Key: fmt.Sprint("g", i), Type: "rejected", GroupID: fmt.Sprintf("gextra%07d", i), Messages: 2})
	}
	p.Arrivals.MoreGroups = 5
	bs, _ := Preview(p, fixedNow())
	card := string(marshal(t, rendered(bs, "")))
	if want := ":white_check_mark: 3 target queues, all with consumers: `orders.created`, `payments.settle` and `billing.retry`"; !strings.Contains(card, want) {
		t.Errorf("the card lacks %q:\n%s", want, card)
	}
	if strings.Count(card, ActionPreviewGroup) != maxCardGroups || strings.Contains(card, "gextra0000001") {
		t.Errorf("the card does not list exactly %d groups:\n%s", maxCardGroups, card)
	}
	// 2 + 2 of the groups not listed, 5 in groups the scan did not keep.
	if want := "…and 9 messages in other failure groups; *Details* lists more."; !strings.Contains(card, want) {
		t.Errorf("the card lacks %q:\n%s", want, card)
	}
}
