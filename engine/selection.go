package engine

import (
	"fmt"
	"github.com/stroma/dlqbot/engine/letter"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// DefaultParkAfter is how many replays leave a message parked.
const DefaultParkAfter = 3

// Selection names one DLQ and the filters that pick messages from it.
// Filters combine with AND; zero values mean "no filter".
type Selection struct {
	DLQ   string `json:"dlq"`
	Vhost string `json:"vhost,omitempty"`
	// IDs, when non-empty, keeps only these message ids.
	IDs    []string      `json:"ids,omitempty"`
	Reason letter.Reason `json:"reason,omitempty"`
	Source string        `json:"source,omitempty"`
	// Since and Until bound the last death time (inclusive); relative
	// durations are resolved by the parser.
	Since     time.Time `json:"since,omitzero"`
	Until     time.Time `json:"until,omitzero"`
	Exception string    `json:"exception,omitempty"` // case-insensitive substring
	Limit     int       `json:"limit,omitempty"`     // at most this many messages, in DLQ order
	// ParkAfter: messages with x-replay-count >= ParkAfter are left out
	// unless IncludeParked (0 means DefaultParkAfter).
	ParkAfter     int  `json:"park_after,omitempty"`
	IncludeParked bool `json:"include_parked,omitempty"`
	// To replays every selected message to this queue instead of its source.
	To string `json:"to,omitempty"`
	// Group keeps only one failure group: its exact text or its GroupID.
	Group string `json:"group,omitempty"`
	// ReplayedBy keeps only copies that came back from this replay: they
	// carry its x-replay-id and a new death (what check counts).
	ReplayedBy string `json:"replayed_by,omitempty"`
	// Headers keeps only messages whose header of each name has exactly
	// that value, read as a string (letter.HeaderString); names are
	// case-sensitive, as AMQP's are.
	Headers map[string]string `json:"headers,omitempty"`
}

// ParkLimit returns the effective park_after.
func (s Selection) ParkLimit() int {
	if s.ParkAfter > 0 {
		return s.ParkAfter
	}
	return DefaultParkAfter
}

// Verdict is what a selection says about one message.
type Verdict int

// Verdicts.
const (
	Excluded Verdict = iota // a filter left it out
	Parked                  // it matched but is at the park limit
	Selected                // it is selected
)

// Match applies every filter except Limit (which depends on order) and
// Headers (MatchHeaders, on the message itself) to m.
func (s Selection) Match(m letter.Meta) Verdict {
	if len(s.IDs) > 0 && !contains(s.IDs, m.ID) {
		return Excluded
	}
	if s.Reason != "" && m.Reason != s.Reason {
		return Excluded
	}
	if s.Source != "" && m.Source != s.Source {
		return Excluded
	}
	death := m.LastDeath
	if death.IsZero() {
		death = m.FirstDeath
	}
	if !s.Since.IsZero() && (death.IsZero() || death.Before(s.Since)) {
		return Excluded
	}
	if !s.Until.IsZero() && (death.IsZero() || death.After(s.Until)) {
		return Excluded
	}
	if s.Exception != "" && !strings.Contains(strings.ToLower(m.ExceptionType+": "+m.Exception), strings.ToLower(s.Exception)) {
		return Excluded
	}
	if s.Group != "" && !inGroup(m.FailureGroup, s.Group) {
		return Excluded
	}
	if s.ReplayedBy != "" && (m.ReplayID != s.ReplayedBy || !m.Returned) {
		return Excluded
	}
	if !s.IncludeParked && m.ReplayCount >= s.ParkLimit() {
		return Parked
	}
	return Selected
}

// MatchHeaders reports whether headers satisfy every header= term: each
// named header present with exactly the value, as a string.
func (s Selection) MatchHeaders(headers map[string]any) bool {
	for name, want := range s.Headers {
		v, ok := headers[name]
		if !ok {
			return false
		}
		got, ok := letter.HeaderString(v)
		if !ok || got != want {
			return false
		}
	}
	return true
}

// quoteIfNeeded quotes a value (Go syntax, as the grammar reads it) when it
// is empty or holds white space, quotes or backslashes.
func quoteIfNeeded(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune("\"'\\“”‘’=", r)
	}) {
		return strconv.Quote(v)
	}
	return v
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// String renders the selection canonically, in the grammar commands parse:
// "orders.dlq reason=rejected limit=10".
func (s Selection) String() string {
	parts := []string{s.DLQ}
	if s.Vhost != "" && s.Vhost != "/" {
		parts = append(parts, "vhost="+s.Vhost)
	}
	if len(s.IDs) > 0 {
		ids := append([]string(nil), s.IDs...)
		sort.Strings(ids)
		parts = append(parts, "ids="+strings.Join(ids, ","))
	}
	if s.Reason != "" {
		parts = append(parts, "reason="+string(s.Reason))
	}
	if s.Source != "" {
		parts = append(parts, "source="+s.Source)
	}
	if !s.Since.IsZero() {
		parts = append(parts, "since="+s.Since.UTC().Format(time.RFC3339))
	}
	if !s.Until.IsZero() {
		parts = append(parts, "until="+s.Until.UTC().Format(time.RFC3339))
	}
	if s.Exception != "" {
		parts = append(parts, fmt.Sprintf("exception=%q", s.Exception))
	}
	if s.Group != "" {
		parts = append(parts, "group="+quoteIfNeeded(s.Group))
	}
	if s.ReplayedBy != "" {
		parts = append(parts, "replayed_by="+s.ReplayedBy)
	}
	if len(s.Headers) > 0 {
		names := make([]string, 0, len(s.Headers))
		for n := range s.Headers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			parts = append(parts, "header."+n+"="+quoteIfNeeded(s.Headers[n]))
		}
	}
	if s.Limit > 0 {
		parts = append(parts, fmt.Sprintf("limit=%d", s.Limit))
	}
	if s.ParkAfter > 0 {
		parts = append(parts, fmt.Sprintf("park_after=%d", s.ParkAfter))
	}
	if s.IncludeParked {
		parts = append(parts, "include_parked=true")
	}
	if s.To != "" {
		parts = append(parts, "to="+s.To)
	}
	return strings.Join(parts, " ")
}
