package blocks

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSamplesShowHeadersOnlyToTheReader: a sample's headers (already
// redacted by the engine) are in the reader's Samples reply, and never in
// the preview posted in the channel.
func TestSamplesShowHeadersOnlyToTheReader(t *testing.T) {
	p := previewWithProblems()
	p.Messages[0].Headers = map[string]string{"tenant": "acme-private", "trace id": "[redacted]"}
	samples, _ := Samples(p)
	raw, _ := json.Marshal(samples)
	if !strings.Contains(string(raw), "tenant=acme-private") || !strings.Contains(string(raw), `trace id=[redacted]`) {
		t.Errorf("the samples do not show the headers: %s", raw)
	}
	post, _ := Preview(p, fixedNow())
	raw, _ = json.Marshal(post)
	if strings.Contains(string(raw), "acme-private") {
		t.Errorf("the channel's preview shows a header: %s", raw)
	}
}
