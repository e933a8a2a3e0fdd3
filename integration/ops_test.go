package integration_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/internal/testkit"
	"github.com/stroma/dlqbot/mcp"
)

// TestScanRateLimitAndAuditTrail: previews count against the scan limit
// per principal and DLQ: the third preview of one DLQ within the window
// is refused in Slack and (for another principal, counted apart) with 429
// and Retry-After through the API; another DLQ is counted apart; the DLQ
// keeps its messages. Every operation is recorded once in the audit
// trail, done or refused, with the token only as its reference.
func TestScanRateLimitAndAuditTrail(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, options{policy: apiPolicy(false), scanLimit: 2}, mcp.Config{})
	_, dlq := dlqWith(e.env, 4)
	_, other := dlqWith(e.env, 2)

	// One after the other: two reads of a DLQ of 4 at once can leave the
	// second nothing to read (the first holds all 4), and then no token.
	e.command("U0ALICE001", "preview "+dlq)
	e.waitPreview(1)
	e.command("U0ALICE001", "preview "+dlq)
	_, tok2 := e.waitPreview(2)
	e.command("U0ALICE001", "preview "+dlq)
	// Each allowed preview also sent its requester the samples, ephemerally;
	// the refusal is the one that says so.
	var refusal string
	testkit.Eventually(t, time.Minute, "the third preview's refusal", func() bool {
		for _, m := range e.stub.Ephemerals("U0ALICE001") {
			if strings.Contains(m.Text, "as often as dlqbot allows") {
				refusal = m.Text
				return true
			}
		}
		return false
	})
	if !strings.Contains(refusal, "Nothing was read") {
		t.Fatalf("third preview in Slack: %q", refusal)
	}
	// Another DLQ, and another principal, are counted apart.
	e.command("U0ALICE001", "preview "+other)
	e.waitPreview(3)
	e.preview(tokRunbook, dlq)
	e.preview(tokRunbook, dlq)
	req, _ := http.NewRequest("POST", e.url+"/api/v1/previews", strings.NewReader(`{"selection":"`+dlq+`"}`))
	req.Header.Set("Authorization", "Bearer "+tokRunbook)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third API preview: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := e.rabbit.Count(dlq); n != 4 {
		t.Fatalf("the DLQ holds %d, want its 4", n)
	}

	// The trail: one entry per operation, refusals with their code.
	slack := 0
	for _, en := range e.trail.Find("", audit.OpPreview, "") {
		if en.FrontEnd != "slack" || en.DLQ != dlq {
			continue
		}
		slack++
		if slack <= 2 && (en.Outcome != audit.OutcomeOK || !strings.HasPrefix(en.TokenRef, "t_") || en.Identity != "U0ALICE001") {
			t.Errorf("allowed preview recorded as %+v", en)
		}
		if slack == 3 && (en.Outcome != audit.OutcomeRefused || en.Code != "rate_limited" || en.TokenRef != "") {
			t.Errorf("refused preview recorded as %+v", en)
		}
	}
	if slack != 3 {
		t.Fatalf("%d Slack previews of %s recorded, want 3 (each once)", slack, dlq)
	}
	if refused := e.trail.Find("", audit.OpPreview, audit.OutcomeRefused); len(refused) != 2 {
		t.Fatalf("%d refused previews recorded, want 2 (Slack and API): %+v", len(refused), refused)
	}
	data, _ := json.Marshal(e.trail.Find("", audit.OpPreview, ""))
	if strings.Contains(string(data), tok2) || !strings.Contains(string(data), audit.TokenRef(tok2)) {
		t.Fatal("the trail holds a raw token, or not its reference")
	}
}
