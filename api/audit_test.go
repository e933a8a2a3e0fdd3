package api

import (
	"testing"
	"time"
)

// TestParseAuditFilter: every documented parameter is read; a bad time, a
// bad limit or an unknown parameter is refused (a misspelt filter must
// never widen a listing).
func TestParseAuditFilter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	f, err := ParseAuditFilter(map[string][]string{
		"since": {"2h"}, "until": {"2030-01-02T03:00:00Z"}, "principal": {"runbook"}, "front_end": {"dashboard"},
		"op": {"pause"}, "outcome": {"refused"}, "dlq": {"orders.dlq"}, "replay_id": {"r_1"}, "after": {"1-0"}, "limit": {"5"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Since.Equal(now.Add(-2*time.Hour)) || f.Until.Hour() != 3 || f.Principal != "runbook" || f.FrontEnd != "dashboard" ||
		f.Op != "pause" || f.Outcome != "refused" || f.DLQ != "orders.dlq" || f.ReplayID != "r_1" || f.After != "1-0" || f.Limit != 5 {
		t.Errorf("filter %+v", f)
	}
	for _, bad := range []map[string][]string{
		{"since": {"yesterday"}}, {"until": {"-2h"}}, {"limit": {"0"}}, {"limit": {"1001"}}, {"limit": {"x"}}, {"prinicpal": {"runbook"}},
	} {
		if _, err := ParseAuditFilter(bad, now); err == nil || err.Status != 400 || err.Code != CodeBadRequest {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
