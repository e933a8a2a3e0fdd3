package blocks

import (
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

func TestPreviewSaysHowReturnsWillBeFound(t *testing.T) {
	for _, v := range []engine.ReturnsView{
		{Mode: engine.ReturnsTap, Tap: "dlqbot.tap.orders.dlq", Detail: "returns will be found through the tap queue dlqbot.tap.orders.dlq"},
		{Mode: engine.ReturnsReread, Reads: 4, Detail: "returns will be found by re-reading the DLQ: 4 read(s) of all of orders.dlq"},
	} {
		p := previewWithProblems()
		p.Returns = v
		bs, text := Preview(p, time.Now())
		mustValidate(t, string(v.Mode), bs, text)
		// The card shows only a warning (re-reading); Details shows either.
		if got := returnsOf(bs); (got != "") != (v.Mode == engine.ReturnsReread) {
			t.Fatalf("%s: the card's returns line %q", v.Mode, got)
		}
		bs, text = PreviewDetails(p)
		mustValidate(t, string(v.Mode)+" details", bs, text)
		line := returnsOf(bs)
		warned := strings.HasPrefix(line, ":warning:")
		if !strings.Contains(line, v.Detail) || warned != (v.Mode == engine.ReturnsReread) {
			t.Fatalf("%s: returns line %q", v.Mode, line)
		}
	}
}

// returnsOf is the text of the returns line among bs.
func returnsOf(bs []slack.Block) string {
	var line string
	for _, b := range bs {
		if b.ID() == BlockPreviewReturns {
			for _, el := range b.(*slack.ContextBlock).ContextElements.Elements {
				if tx, ok := el.(*slack.TextBlockObject); ok {
					line += tx.Text
				}
			}
		}
	}
	return line
}
