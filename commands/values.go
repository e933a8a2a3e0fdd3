package commands

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// Defaults of a replay's parameters, as the help text states them.
const (
	DefaultStep = engine.DefaultStep
	DefaultCap  = engine.DefaultCap
)

// Bounds on values, so a typo cannot ask for something absurd.
const (
	maxCount      = 1_000_000_000
	minRate       = 0.01
	maxRate       = 1_000_000
	minTimeout    = time.Second
	maxTimeout    = 24 * time.Hour
	maxQueueBytes = 255
)

// Reasons lists the values reason= accepts, in help order.
var Reasons = []engine.Reason{
	engine.ReasonRejected, engine.ReasonExpired, engine.ReasonMaxLen,
	engine.ReasonDeliveryLimit, engine.ReasonException, engine.ReasonSkipped,
	engine.ReasonUnknown,
}

var (
	idPattern     = regexp.MustCompile(`^[0-9a-f]{16}$`)
	opaquePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{4,80}$`)
	// agoPattern is a relative time: optional "-", whole days or weeks,
	// then Go duration units.
	agoPattern = regexp.MustCompile(`^(-?)(?:([0-9]+)([dw]))?((?:[0-9]+(?:\.[0-9]*)?(?:ns|us|µs|μs|ms|s|m|h))*)$`)
)

// checkQueue returns why v is not a usable queue (or vhost) name, or "".
// RabbitMQ allows up to 255 bytes of UTF-8; white space, control and
// invisible characters are refused because they are never intended, and a
// leading quote because the name could not be written back unquoted.
func checkQueue(what, v string) string {
	switch {
	case v == "":
		return what + " is empty"
	case !utf8.ValidString(v):
		return fmt.Sprintf("%s `%s` is not valid UTF-8", what, v)
	case len(v) > maxQueueBytes:
		return fmt.Sprintf("%s `%.40s…` is %d bytes long; RabbitMQ names are at most %d bytes", what, v, len(v), maxQueueBytes)
	}
	if _, ok := closers[[]rune(v)[0]]; ok {
		return fmt.Sprintf("%s `%s` starts with a quote", what, v)
	}
	// The same check as a queue named in a message's headers.
	if r, bad := engine.BadNameRune(v); bad {
		return fmt.Sprintf("%s %q contains white space, a control character or an invisible one (%U)", what, v, r)
	}
	return ""
}

// parseIDs reads ids=<id,…>: 16 hex characters each, returned lower-cased,
// sorted and without duplicates (the canonical order).
func parseIDs(v string) ([]string, string) {
	var ids []string
	for part := range strings.SplitSeq(v, ",") {
		id := strings.ToLower(part)
		if id == "" {
			return nil, fmt.Sprintf("`ids=%s` has an empty entry; separate ids with single commas and no spaces", v)
		}
		if !idPattern.MatchString(id) {
			return nil, fmt.Sprintf("`%s` in `ids=` is not a message id; ids are the 16 hex characters shown in a preview", part)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), ""
}

// parseReason reads reason=; case and dashes are forgiven
// (Delivery-Limit is delivery_limit).
func parseReason(v string) (engine.Reason, string) {
	norm := strings.ReplaceAll(strings.ToLower(v), "-", "_")
	for _, r := range Reasons {
		if string(r) == norm {
			return r, ""
		}
	}
	if s := reasonSuggestion(v); s != "" {
		return "", fmt.Sprintf("`reason=%s` is not a dead-letter reason; did you mean `reason=%s`?", v, s)
	}
	return "", fmt.Sprintf("`reason=%s` is not a dead-letter reason; use one of %s", v, reasonList())
}

// reasonSuggestion returns the reason closest to v, or "".
func reasonSuggestion(v string) string {
	names := make([]string, len(Reasons))
	for i, r := range Reasons {
		names[i] = string(r)
	}
	return suggest(strings.ReplaceAll(strings.ToLower(v), "-", "_"), names)
}

// parseWhen reads since= or until=: an RFC 3339 time, a date (midnight
// UTC), or a duration meaning that long before now ("2h", "90m", "1d",
// "1w", "1d12h"; a leading "-" is allowed and means the same). Times are
// returned in UTC, truncated to the second (the canonical form has no
// fractions).
func parseWhen(key, v string, now time.Time) (time.Time, string) {
	var t time.Time
	if d, ok := parseAgo(v); ok {
		if d < 0 {
			return t, fmt.Sprintf("`%s=%s` is too far back", key, v)
		}
		t = now.Add(-d)
	} else if parsed, err := time.Parse(time.RFC3339, v); err == nil {
		t = parsed
	} else if parsed, err := time.Parse(time.DateOnly, v); err == nil {
		t = parsed
	} else {
		return t, fmt.Sprintf("`%s=%s` is neither a time nor a duration; write an RFC 3339 time like 2024-05-01T12:00:00Z or a duration like 2h, 30m or 1d (that long ago)", key, v)
	}
	t = t.UTC().Truncate(time.Second)
	if y := t.Year(); y < 1970 || y > 9999 {
		return time.Time{}, fmt.Sprintf("`%s=%s` is out of range (year %d)", key, v, y)
	}
	return t, ""
}

// parseAgo reads a duration for since=/until=: Go syntax plus whole days
// and weeks before it ("1d", "2w", "1d12h"). ok is false when v is not
// written as a duration at all; a negative result means it overflows.
func parseAgo(v string) (d time.Duration, ok bool) {
	m := agoPattern.FindStringSubmatch(v)
	if m == nil || m[2] == "" && m[4] == "" {
		return 0, false
	}
	if m[2] != "" {
		n, err := strconv.ParseInt(m[2], 10, 64)
		unit := int64(24)
		if m[3] == "w" {
			unit *= 7
		}
		if err != nil || n > math.MaxInt64/int64(time.Hour)/unit {
			return -1, true
		}
		d = time.Duration(n*unit) * time.Hour
	}
	if m[4] != "" {
		rest, err := time.ParseDuration(m[4])
		if err != nil || d+rest < d {
			return -1, true
		}
		d += rest
	}
	return d, true
}

// parseCount reads a whole number from 1 to maxCount, digits only.
func parseCount(key, v string) (int, string) {
	for _, r := range v {
		if r < '0' || r > '9' {
			return 0, fmt.Sprintf("`%s=%s` is not a whole number", key, v)
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > maxCount {
		return 0, fmt.Sprintf("`%s=%s` is too large (at most %d)", key, v, maxCount)
	}
	if n < 1 {
		return 0, fmt.Sprintf("`%s=%s` must be at least 1", key, v)
	}
	return n, ""
}

// parseBool reads true or false (yes and no also do).
func parseBool(key, v string) (bool, string) {
	switch strings.ToLower(v) {
	case "true", "yes":
		return true, ""
	case "false", "no":
		return false, ""
	}
	return false, fmt.Sprintf("`%s=%s` must be true or false", key, v)
}

// parseRate reads rate=: messages per second, or "max" for unpaced
// (returned as -1, which engine.Params reads as unpaced).
func parseRate(v string) (float64, string) {
	if strings.EqualFold(v, "max") {
		return -1, ""
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(r) || math.IsInf(r, 0) || strings.ContainsAny(v, "xXpP_") {
		return 0, fmt.Sprintf("`rate=%s` is not a number of messages per second", v)
	}
	if r < minRate || r > maxRate {
		return 0, fmt.Sprintf("`rate=%s` is out of range: use %g to %d messages per second, or rate=max for no pacing", v, minRate, maxRate)
	}
	return r, ""
}

// parseRateAuto reads rate=: auto (pace to the consumer), or what
// parseRate reads.
func parseRateAuto(v string) (float64, bool, string) {
	if strings.EqualFold(v, "auto") {
		return 0, true, ""
	}
	r, msg := parseRate(v)
	if msg != "" {
		msg += ", or rate=auto to pace to the consumer"
	}
	return r, false, msg
}

// parseMax reads max=: the most rate=auto sends, in messages per second.
func parseMax(v string) (float64, string) {
	if strings.EqualFold(v, "max") {
		return 0, "`max=max` means nothing: without max= rate=auto goes up to its default ceiling"
	}
	r, msg := parseRate(v)
	if msg != "" {
		return 0, strings.Replace(strings.Replace(msg, "`rate=", "`max=", 1), ", or rate=max for no pacing", "", 1)
	}
	return r, ""
}

// parseTimeout reads timeout=: a Go duration from 1s to 24h.
func parseTimeout(v string) (time.Duration, string) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Sprintf("`timeout=%s` is not a duration; write it like 30s, 2m or 1m30s", v)
	}
	if d < minTimeout || d > maxTimeout {
		return 0, fmt.Sprintf("`timeout=%s` is out of range: use %s to %s", v, minTimeout, maxTimeout)
	}
	return d, ""
}

// checkOpaque returns why v is not a plausible token or replay id, or "".
func checkOpaque(what, v string) string {
	if opaquePattern.MatchString(v) {
		return ""
	}
	if checkQueue("", v) == "" && strings.ContainsAny(v, ".:/") {
		return fmt.Sprintf("`%s` looks like a queue name, not a %s", v, what)
	}
	return fmt.Sprintf("`%s` is not a %s (4 to 80 letters, digits, - or _)", v, what)
}

// suggest returns the candidate closest to word (edit distance at most 2,
// or 1 for short words), or "".
func suggest(word string, candidates []string) string {
	best, bestDist := "", 3
	if utf8.RuneCountInString(word) <= 3 {
		bestDist = 2
	}
	for _, c := range candidates {
		if d := distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, with an adjacent
// transposition counted as one edit.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 99
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// ReplayParams are a replay's parameters as a program gives them (the
// HTTP API, MCP), before they are checked: nil or "" means the default.
type ReplayParams struct {
	Step, Cap *int
	// Rate is messages per second, "max" for unpaced, or "auto" to pace
	// to the consumer (the default).
	Rate string
	// Max is the most rate=auto sends, in messages per second ("" means
	// its default).
	Max string
	// Timeout is a step's settle timeout in Go syntax ("30s").
	Timeout string
}

// CheckReplayParams checks v with the rules `replay step= cap= rate=
// timeout=` applies, as typed values (nothing is written as a command
// line and parsed), and returns the engine's parameters, or the problem
// in a sentence. A step or cap below 1 is refused, as is one above the
// grammar's bound.
func CheckReplayParams(v ReplayParams) (engine.Params, string) {
	var prm engine.Params
	for _, c := range []struct {
		key string
		n   *int
		to  *int
	}{{"step", v.Step, &prm.Step}, {"cap", v.Cap, &prm.Cap}} {
		switch {
		case c.n == nil:
		case *c.n < 1:
			return engine.Params{}, fmt.Sprintf("`%s=%d` must be at least 1", c.key, *c.n)
		case *c.n > maxCount:
			return engine.Params{}, fmt.Sprintf("`%s=%d` is too large (at most %d)", c.key, *c.n, maxCount)
		default:
			*c.to = *c.n
		}
	}
	if v.Rate != "" {
		r, auto, msg := parseRateAuto(v.Rate)
		if msg != "" {
			return engine.Params{}, msg
		}
		prm.Rate, prm.Auto = r, auto
	}
	if v.Max != "" {
		m, msg := parseMax(v.Max)
		if msg != "" {
			return engine.Params{}, msg
		}
		prm.Max = m
	}
	if v.Timeout != "" {
		d, msg := parseTimeout(v.Timeout)
		if msg != "" {
			return engine.Params{}, msg
		}
		prm.Timeout = d
	}
	if msg, _ := checkParams(prm); msg != "" {
		return engine.Params{}, msg
	}
	return prm, ""
}
