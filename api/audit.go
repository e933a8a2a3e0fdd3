package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stroma/dlqbot/audit"
)

// Audit returns the audit entries f selects that the caller may see
// (ops.Ops.AuditVisible: those of DLQs it may read, and its own that name
// no DLQ). Oldest first; f.Limit defaults to 100.
func (s *Service) Audit(ctx context.Context, c Caller, f audit.Filter) ([]audit.Entry, error) {
	if s.d.AuditLog == nil {
		return nil, newError(http.StatusNotImplemented, CodeUnavailable, "This dlqbot keeps no audit trail.")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultAuditList
	}
	if limit > MaxAuditList {
		return nil, newError(http.StatusBadRequest, CodeBadRequest, "At most %d audit entries can be listed at once.", MaxAuditList)
	}
	visible := s.ops.AuditVisible(ctx, c)
	out := []audit.Entry{}
	for len(out) < limit {
		f.Limit = min(MaxAuditList, 2*(limit-len(out))+10)
		page, err := s.d.AuditLog.List(ctx, f)
		if err != nil {
			return nil, asError(err, "")
		}
		for _, e := range page {
			if visible(e) && len(out) < limit {
				out = append(out, e)
			}
		}
		if len(page) < f.Limit {
			break
		}
		f.After = page[len(page)-1].ID
	}
	return out, nil
}

// Sizes of an audit listing.
const (
	DefaultAuditList = 100
	MaxAuditList     = 1000
)

// ParseAuditFilter reads an audit filter from query parameters (since,
// until: RFC 3339 or a duration back from now such as 2h; principal,
// front_end, op, outcome, dlq, replay_id, after, limit). Unknown
// parameters are refused, so a misspelt filter never widens a listing.
func ParseAuditFilter(q map[string][]string, now time.Time) (audit.Filter, *Error) {
	var f audit.Filter
	for k, vs := range q {
		v := ""
		if len(vs) > 0 {
			v = vs[len(vs)-1]
		}
		switch k {
		case "since", "until":
			t, err := parseWhen(v, now)
			if err != nil {
				return f, newError(http.StatusBadRequest, CodeBadRequest, "%s must be an RFC 3339 time or a duration such as 2h, not %q.", k, v)
			}
			if k == "since" {
				f.Since = t
			} else {
				f.Until = t
			}
		case "principal":
			f.Principal = v
		case "front_end":
			f.FrontEnd = v
		case "op":
			f.Op = v
		case "outcome":
			f.Outcome = v
		case "dlq":
			f.DLQ = v
		case "replay_id":
			f.ReplayID = v
		case "after":
			f.After = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxAuditList {
				return f, newError(http.StatusBadRequest, CodeBadRequest, "limit must be a whole number from 1 to %d, not %q.", MaxAuditList, v)
			}
			f.Limit = n
		default:
			return f, newError(http.StatusBadRequest, CodeBadRequest, "Unknown audit filter %q; see api/openapi.yaml.", k)
		}
	}
	return f, nil
}

func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, errors.New("not a time")
	}
	return now.Add(-d), nil
}

// listAudit serves GET /api/v1/audit: the entries as JSON lines
// (application/x-ndjson), oldest first; to continue, call again with
// after set to the last entry's id.
func (h *handler) listAudit(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	f, ferr := ParseAuditFilter(r.URL.Query(), time.Now())
	if ferr != nil {
		return nil, 0, ferr
	}
	entries, err := h.s.Audit(r.Context(), c, f)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			break
		}
	}
	return nil, http.StatusOK, nil
}
