package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/audit"
)

// Defaults of the audit trail.
const (
	// DefaultAuditRetention is how long audit entries are kept.
	DefaultAuditRetention = 90 * 24 * time.Hour
	// DefaultAuditList is how many entries List returns without a limit.
	DefaultAuditList = 100
	// MaxAuditList is the most entries one List returns.
	MaxAuditList = 1000
)

var (
	_ audit.Recorder = (*Audit)(nil)
	_ audit.Reader   = (*Audit)(nil)
)

// Audit is the audit trail: one Redis stream per prefix (Paudit), one
// entry per operation (field "e": the entry's JSON, "p" and "h": its
// place in the hash chain, audit_chain.go), appended and never edited.
// Each append trims the entries older than the retention
// (Config.AuditRetention) or past the cap (Config.AuditMaxLen), so the
// trail keeps at least that long and not much longer; each principal may
// add Config.AuditRate entries a minute. Entry ids are the stream's ids, whose
// milliseconds are the store clock's time of the append.
type Audit struct{ b *base }

// Audit returns the audit trail (audit.Recorder and audit.Reader).
func (s *Store) Audit() *Audit { return &Audit{s.b} }

// Record appends e and sets e.ID (audit.Recorder). A zero e.Time is the
// store clock's now. An entry without an operation, outcome or principal
// identity is refused: the trail must say who did what.
func (a *Audit) Record(ctx context.Context, e audit.Entry) error {
	switch {
	case e.Op == "" || e.Outcome == "":
		return fmt.Errorf("store: record audit entry: an entry needs an operation and an outcome")
	case e.Identity == "" && e.Principal == "":
		return fmt.Errorf("store: record audit entry %s: an entry needs the caller", e.Op)
	}
	now := a.b.now()
	if e.Time.IsZero() {
		e.Time = now
	}
	e.ID = ""
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: record audit entry %s: %w", e.Op, err)
	}
	minID := int64(0)
	if r := a.b.cfg.AuditRetention; r > 0 {
		minID = now.Add(-r).UnixMilli()
	}
	maxLen := max(a.b.cfg.AuditMaxLen, 0)
	principal := e.Principal
	if principal == "" {
		principal = e.Identity
	}
	if err := a.admitAudit(ctx, principal); err != nil {
		return err
	}
	keys := []string{a.b.k.audit(), a.b.k.auditAnchor()}
	for attempt := 0; attempt < updateAttempts; attempt++ {
		lastID, prev, err := a.lastAudit(ctx)
		if err != nil {
			return fail(err, "record audit entry %s", e.Op)
		}
		id, err := appendAuditScript.Run(ctx, a.b.rdb, keys, now.UnixMilli(), minID, data,
			prev, a.b.auditHash(prev, data), lastID, maxLen).Text()
		if err != nil {
			return fail(err, "record audit entry %s", e.Op)
		}
		if id != "" {
			e.ID = id
			return nil
		}
	}
	return fmt.Errorf("store: record audit entry %s: %d attempts lost to concurrent writers", e.Op, updateAttempts)
}

// List returns the entries f selects, oldest first (audit.Reader): at most
// f.Limit (default DefaultAuditList, at most MaxAuditList), after f.After
// when set. Entries older than the retention are gone even before the next
// append trims them. A begun entry (audit.OutcomeBegun) is listed only
// while no entry among the auditLookahead after it concludes it
// (audit.Concludes): an operation shows as its outcome, and as begun only
// when its outcome was never recorded. f.Outcome "begun" lists every
// begun entry. Fewer than the limit means the trail's end was reached.
func (a *Audit) List(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultAuditList
	}
	if limit > MaxAuditList {
		return nil, fmt.Errorf("store: list audit: at most %d entries at once, not %d", MaxAuditList, limit)
	}
	start, end := "-", "+"
	if !f.Since.IsZero() {
		start = strconv.FormatInt(f.Since.UnixMilli(), 10)
	}
	if r := a.b.cfg.AuditRetention; r > 0 {
		if oldest := a.b.now().Add(-r).UnixMilli(); start == "-" || f.Since.UnixMilli() < oldest {
			start = strconv.FormatInt(oldest, 10)
		}
	}
	if f.After != "" {
		if !validStreamID(f.After) {
			return nil, fmt.Errorf("store: list audit: %q is not an entry id", f.After)
		}
		if start == "-" || compareStreamIDs(f.After, start) >= 0 {
			start = "(" + f.After
		}
	}
	if !f.Until.IsZero() {
		end = "(" + strconv.FormatInt(f.Until.UnixMilli(), 10)
	}
	out := []audit.Entry{}
	const batch = 500
	for len(out) < limit {
		msgs, err := a.b.rdb.XRangeN(ctx, a.b.k.audit(), start, end, batch).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fail(err, "list audit")
		}
		var page []audit.Entry
		for _, m := range msgs {
			e, err := decodeAudit(m)
			if err != nil {
				return nil, err
			}
			if matches(e, f) {
				page = append(page, e)
			}
		}
		if f.Outcome != audit.OutcomeBegun {
			if page, err = a.dropConcluded(ctx, page); err != nil {
				return nil, err
			}
		}
		out = append(out, page[:min(len(page), limit-len(out))]...)
		if len(msgs) < batch {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	return out, nil
}

// auditLookahead is how many entries after a begun one List reads for its
// outcome.
const auditLookahead = 2000

// dropConcluded returns page without its begun entries that a later entry
// of the trail concludes; each later entry concludes at most one, the
// oldest it can.
func (a *Audit) dropConcluded(ctx context.Context, page []audit.Entry) ([]audit.Entry, error) {
	var open []audit.Entry
	for _, e := range page {
		if e.Outcome == audit.OutcomeBegun {
			open = append(open, e)
		}
	}
	if len(open) == 0 {
		return page, nil
	}
	done := map[string]bool{}
	start, read := "("+open[0].ID, 0
	for len(open) > 0 && read < auditLookahead {
		msgs, err := a.b.rdb.XRangeN(ctx, a.b.k.audit(), start, "+", 500).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fail(err, "list audit")
		}
		for _, m := range msgs {
			x, err := decodeAudit(m)
			if err != nil {
				return nil, err
			}
			for i, b := range open {
				if compareStreamIDs(b.ID, x.ID) < 0 && audit.Concludes(x, b) {
					done[b.ID] = true
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
		}
		read += len(msgs)
		if len(msgs) < 500 {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	out := page[:0:0]
	for _, e := range page {
		if !done[e.ID] {
			out = append(out, e)
		}
	}
	return out, nil
}

// decodeAudit reads one stream entry of the trail.
func decodeAudit(m redis.XMessage) (audit.Entry, error) {
	raw, _ := m.Values["e"].(string)
	var e audit.Entry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return e, fmt.Errorf("store: list audit: entry %s: %w", m.ID, err)
	}
	e.ID = m.ID
	return e, nil
}

// matches reports whether e passes f's field filters (the time bounds are
// the range's).
func matches(e audit.Entry, f audit.Filter) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	principal := f.Principal == "" || f.Principal == e.Principal || f.Principal == e.Identity
	return principal && eq(f.FrontEnd, e.FrontEnd) && eq(f.Op, e.Op) && eq(f.Outcome, e.Outcome) &&
		eq(f.DLQ, e.DLQ) && eq(f.ReplayID, e.ReplayID) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since)) && (f.Until.IsZero() || e.Time.Before(f.Until))
}

// validStreamID reports whether s is a stream id: "<ms>" or "<ms>-<seq>".
func validStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return false
	}
	if ok {
		if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// compareStreamIDs orders two valid stream ids ("<ms>" counts as "<ms>-0").
func compareStreamIDs(a, b string) int {
	parse := func(s string) (uint64, uint64) {
		ms, seq, _ := strings.Cut(s, "-")
		m, _ := strconv.ParseUint(ms, 10, 64)
		q, _ := strconv.ParseUint(seq, 10, 64)
		return m, q
	}
	am, aq := parse(a)
	bm, bq := parse(b)
	switch {
	case am != bm:
		if am < bm {
			return -1
		}
		return 1
	case aq != bq:
		if aq < bq {
			return -1
		}
		return 1
	}
	return 0
}
