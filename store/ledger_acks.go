package store

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// Confirms and abandons are compact records, not one write per copy: a
// copy is named by its x-dlqbot-copy tag, "<prefix>-<n>" (a move's read
// numbers its copies), so a batch of copies is a few ranges of n. Each
// replay's acks hash (P{<replay>}:acks) has one field per prefix and block
// of ackBlock numbers, to which each batch appends one segment:
// "c<unix ms>:<lo>-<hi>,…;" for confirmed copies, "a:<lo>-<hi>,…;" for
// abandoned ones, with the segment's MAC before the ";" when signed
// ("#<MAC>;", ledger_sign.go). A window of 250 copies is one or two segments, written
// by one script call; a page of the ledger reads the few fields its
// windows need (ledger_pages.go). Entries whose copy is not of that form
// (written before copies were named) are recorded as earlier releases did
// (Ledger.write), and the ledger is then read whole.

// ackBlock is how many copy numbers one acks field covers.
const ackBlock = 4096

// ackScript appends segments to a replay's acks.
//
//	KEYS[1] the replay's acks, KEYS[2] its ledger (same slot)
//	ARGV[1] retention in ms (0: none), then pairs of field and segment
var ackScript = redis.NewScript(`
for i = 2, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  redis.call('HSET', KEYS[1], ARGV[i], cur .. ARGV[i+1])
end
if tonumber(ARGV[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
return 1
`)

// parseCopy splits a copy tag "<prefix>-<n>", n ≥ 1 in decimal digits.
func parseCopy(tag string) (prefix string, n int64, ok bool) {
	i := strings.LastIndexByte(tag, '-')
	if i <= 0 || i == len(tag)-1 {
		return "", 0, false
	}
	for _, c := range tag[i+1:] {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.ParseInt(tag[i+1:], 10, 64)
	if err != nil || n < 1 {
		return "", 0, false
	}
	return tag[:i], n, true
}

// ackField is the acks field of copy n of prefix.
func ackField(prefix string, n int64) string {
	return "c:" + prefix + ":" + strconv.FormatInt(n/ackBlock, 10)
}

// ack records entries as confirmed (kind 'c') or abandoned ('a') in compact
// segments, one script call per replay in one round trip, and returns the
// entries a segment cannot name (no copy tag of the compact form).
func (l *Ledger) ack(ctx context.Context, kind byte, entries []engine.LedgerEntry) ([]engine.LedgerEntry, error) {
	type seg struct {
		field string
		ms    int64
	}
	byReplay := map[string]map[seg][]int64{}
	var order []string
	var rest []engine.LedgerEntry
	now := l.b.now()
	for _, e := range entries {
		prefix, n, ok := parseCopy(e.Copy)
		if !ok {
			rest = append(rest, e)
			continue
		}
		if err := checkTag("replay id", e.ReplayID); err != nil {
			return nil, err
		}
		at := e.At
		if at.IsZero() {
			at = now
		}
		s := seg{field: ackField(prefix, n)}
		if kind == 'c' {
			s.ms = at.UnixMilli()
		}
		m := byReplay[e.ReplayID]
		if m == nil {
			m = map[seg][]int64{}
			byReplay[e.ReplayID] = m
			order = append(order, e.ReplayID)
		}
		m[s] = append(m[s], n)
	}
	if len(order) == 0 {
		return rest, nil
	}
	sp := l.b.pipeline()
	for _, rid := range order {
		segs := make([]seg, 0, len(byReplay[rid]))
		for s := range byReplay[rid] {
			segs = append(segs, s)
		}
		sort.Slice(segs, func(i, j int) bool {
			return segs[i].field < segs[j].field || segs[i].field == segs[j].field && segs[i].ms < segs[j].ms
		})
		args := make([]any, 0, 1+2*len(segs))
		args = append(args, l.b.cfg.retentionMs())
		for _, s := range segs {
			args = append(args, s.field, l.b.signSegment(rid, s.field, segment(kind, s.ms, byReplay[rid][s])))
		}
		sp.Script(ctx, ackScript, []string{l.b.k.acks(rid), l.b.k.ledger(rid)}, args...)
	}
	l.flushSentFloors(ctx, sp)
	return rest, sp.Exec(ctx)
}

// segment words one batch of copy numbers: "c<ms>:<lo>-<hi>,…;" or
// "a:<lo>-<hi>,…;".
func segment(kind byte, ms int64, ns []int64) string {
	slices := append([]int64(nil), ns...)
	sort.Slice(slices, func(i, j int) bool { return slices[i] < slices[j] })
	var b strings.Builder
	b.WriteByte(kind)
	if kind == 'c' {
		b.WriteString(strconv.FormatInt(ms, 10))
	}
	b.WriteByte(':')
	for i := 0; i < len(slices); {
		j := i
		for j+1 < len(slices) && slices[j+1] <= slices[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(slices[i], 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(slices[j], 10))
		i = j + 1
	}
	b.WriteByte(';')
	return b.String()
}

// ackSeg is one parsed segment.
type ackSeg struct {
	kind   byte
	at     time.Time
	ranges [][2]int64
}

// acks reads a field's segments, each checked against its MAC (a
// segment that fails refuses the read); malformed ones are skipped.
func (c *ledgerCheck) acks(field, v string) ([]ackSeg, error) {
	var out []ackSeg
	for _, s := range strings.Split(v, ";") {
		if s == "" {
			continue
		}
		body, err := c.segment(field, s)
		if err != nil {
			return nil, err
		}
		if sg, ok := parseSeg(body); ok {
			out = append(out, sg)
		}
	}
	return out, nil
}

// parseSeg reads one segment's body: "c<ms>:<lo>-<hi>,…" or
// "a:<lo>-<hi>,…".
func parseSeg(s string) (ackSeg, bool) {
	head, body, ok := strings.Cut(s, ":")
	if !ok || head == "" || (head[0] != 'c' && head[0] != 'a') {
		return ackSeg{}, false
	}
	sg := ackSeg{kind: head[0]}
	if sg.kind == 'c' {
		ms, err := strconv.ParseInt(head[1:], 10, 64)
		if err != nil {
			return ackSeg{}, false
		}
		sg.at = time.UnixMilli(ms).UTC()
	}
	for _, r := range strings.Split(body, ",") {
		lo, hi, ok := strings.Cut(r, "-")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if ok && err1 == nil && err2 == nil {
			sg.ranges = append(sg.ranges, [2]int64{a, b})
		}
	}
	return sg, true
}

// ackOf says what the segments record of copy n: 'c' (confirmed at at),
// 'a' (abandoned) or 0 (nothing: still pending). A confirm wins.
func ackOf(segs []ackSeg, n int64) (kind byte, at time.Time) {
	for _, s := range segs {
		for _, r := range s.ranges {
			if n >= r[0] && n <= r[1] {
				if s.kind == 'c' {
					return 'c', s.at
				}
				kind = 'a'
			}
		}
	}
	return kind, time.Time{}
}
