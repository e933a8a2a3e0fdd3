package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
)

// note is one operation's audit entry, filled in as the operation learns
// what it concerns and appended when it returns.
type note struct {
	s *Service
	e audit.Entry
}

// note starts the audit entry of operation op by caller c.
func (s *Service) note(c Caller, op string) *note {
	principal := c.Principal
	if principal == "" {
		principal = c.ID
	}
	return &note{s: s, e: audit.Entry{Time: s.d.Now(), Principal: principal, Identity: c.ID, FrontEnd: c.Via, Op: op}}
}

// done appends the entry with the outcome err gives: none is ok, a
// refusal (an answer below 500: bad input, forbidden, changed, used
// token…) is refused, anything else failed. A trail that cannot be
// written is logged; the operation's own answer stands.
func (n *note) done(ctx context.Context, err error) {
	if n.s.d.Audit == nil {
		return
	}
	n.e.Outcome = audit.OutcomeOK
	if err != nil {
		ae := asError(err, "")
		n.e.Code, n.e.Outcome = ae.Code, audit.OutcomeRefused
		if ae.Status >= 500 {
			n.e.Outcome = audit.OutcomeFailed
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if werr := n.s.d.Audit.Record(wctx, n.e); werr != nil {
		n.s.log.Error().Err(werr).Str("op", n.e.Op).Str("principal", n.e.Principal).Str("replay_id", n.e.ReplayID).
			Msg("audit entry not recorded")
	}
}

// Audit returns the audit entries f selects that the caller may see: those
// of DLQs it may read, and those without a DLQ that it made itself (a
// selection that did not parse). Oldest first; f.Limit defaults to 100.
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
	out := []audit.Entry{}
	err := s.permit(ctx, c, func(g []string) error {
		for len(out) < limit {
			f.Limit = min(MaxAuditList, 2*(limit-len(out))+10)
			page, err := s.d.AuditLog.List(ctx, f)
			if err != nil {
				return err
			}
			for _, e := range page {
				visible := e.Identity == c.ID
				if e.DLQ != "" {
					visible = s.cfg.Policy.Allowed(c.ID, g, commands.ActionRead, e.DLQ)
				}
				if visible && len(out) < limit {
					out = append(out, e)
				}
			}
			if len(page) < f.Limit {
				break
			}
			f.After = page[len(page)-1].ID
		}
		return nil
	})
	if err != nil {
		return nil, asError(err, "")
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
	f, ferr := ParseAuditFilter(r.URL.Query(), h.s.d.Now())
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
