package blocks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestPreviewPostCarriesNoPayloadOrException: the preview posted in a
// channel (and its approved and discarded edits) contains no byte of any
// message's payload excerpt and no exception text or type, while the
// reader's Samples reply has them; the post offers Show samples.
func TestPreviewPostCarriesNoPayloadOrException(t *testing.T) {
	p := previewWithProblems()
	var secrets []string
	for _, m := range p.Messages {
		for _, s := range []string{m.Excerpt, m.Exception, m.ExceptionType} {
			if s != "" {
				secrets = append(secrets, s)
			}
		}
	}
	if len(secrets) < 4 {
		t.Fatalf("the fixture has only %d payloads and exceptions", len(secrets))
	}
	post, text := Preview(p, fixedNow())
	for name, bl := range map[string]any{"post": post, "approved": PreviewApprovedBlocks(p), "discarded": PreviewDiscardedBlocks(p)} {
		raw, err := json.Marshal(bl)
		if err != nil {
			t.Fatal(err)
		}
		all := string(raw) + text
		for _, s := range secrets {
			for _, frag := range fragments(s) {
				if strings.Contains(all, frag) || strings.Contains(all, escape(frag)) || strings.Contains(all, jsonText(frag)) {
					t.Errorf("%s carries %q (of %q)", name, frag, s)
				}
			}
		}
	}
	raw, _ := json.Marshal(post)
	if !strings.Contains(string(raw), `"`+ActionSamples+`"`) {
		t.Errorf("the post has no %s button", ActionSamples)
	}
	sb, _ := Samples(p)
	raw, _ = json.Marshal(sb)
	for _, want := range []string{"IllegalStateException", "4711", "plain payload"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the samples lack %q", want)
		}
	}
	// Without excerpts or exceptions there is nothing to show: no button.
	bare := previewWithProblems()
	for i := range bare.Messages {
		bare.Messages[i].Excerpt, bare.Messages[i].Exception, bare.Messages[i].ExceptionType = "", "", ""
	}
	bl, _ := Preview(bare, fixedNow())
	if raw, _ := json.Marshal(bl); strings.Contains(string(raw), ActionSamples) {
		t.Errorf("a preview without samples offers %s", ActionSamples)
	}
}

// fragments cuts s into the distinctive pieces a leak would show: each
// word of four bytes or more.
func fragments(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \n\t\"{}:,`<>&@!*.", r) }) {
		if len(w) >= 4 && !common[w] {
			out = append(out, w)
		}
	}
	return out
}

// common words that the preview says of its own accord.
var common = map[string]bool{"order": true, "orders": true, "note": true, "channel": true, "found": true, "plain": true}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// PreviewApprovedBlocks and PreviewDiscardedBlocks are the edits of p's post.
func PreviewApprovedBlocks(p *engine.Preview) any {
	bl, _ := PreviewApproved(p, approver, replayID)
	return bl
}

func PreviewDiscardedBlocks(p *engine.Preview) any {
	bl, _ := PreviewDiscarded(p, asker)
	return bl
}
