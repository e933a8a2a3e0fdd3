package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The taps' record (returns.go) is counted by a Lua script in Redis, where
// the signing key never goes, so its counts cannot carry a MAC of their
// own. A store with a key keeps a signed floor beside each count instead:
// after every batch, Go (which holds the key) writes what the script
// just returned — a replay's returned events n, its log's length, its
// hash's field count and its baseline; a DLQ's arrivals — with the time
// and the MAC of the kind, the replay id or DLQ and those numbers. Counts
// only grow, so a count below its floor, a floor that fails its MAC, a
// floor whose count is missing (before the two could have expired), or a
// count without a floor was changed in Redis: the read is refused
// (SignatureError, kinds "returns" and "tap arrivals", reported through
// Config.OnBadSignature). The floor lags the count (a batch counted between
// the script and the floor's write is above it, as it may be).
//
// A batch's script also returns the floor and the counts as they were
// before the batch: a writer that finds them lowered writes the new floor
// marked tainted, so that later batches cannot raise the count back over
// the floor unseen; a tainted floor is refused by every read. Floors are
// written by a script that never lowers one (concurrent writers finish in
// any order). A floor copied earlier and written back with the count
// lowered to it is signed and consistent: each process also remembers the
// highest count it has seen or written (until the count could have
// expired) and refuses one below it, as it does with replay versions.

// floorSlack is how long past its last write a count may be found
// expired while its floor (kept floorSlack longer) remains.
const floorSlack = time.Hour

// floorClock is how far apart the clocks of the processes that write a
// floor and read its count may be: a count missing within it of its
// floor's time plus the retention is taken as expired.
const floorClock = time.Minute

// Kinds of the taps' signed floors, in their MACs and refusals.
const (
	kindReturns  = "returns"
	kindArrivals = "tap arrivals"
)

// tapCount is a count of the taps' record as read from Redis.
type tapCount struct {
	exists bool
	n      int64
	log    int64 // a replay's return log length
	fields int64 // a replay's hash fields
	base   int64 // a replay's baseline, -1: none
}

// floor is a count's signed floor.
type floor struct {
	tapCount
	taint bool
	at    int64 // unix ms of its write
}

// body is what a floor's MAC covers, besides its kind and id.
func (f floor) body() string {
	t := 0
	if f.taint {
		t = 1
	}
	return fmt.Sprintf("%d %d %d %d %d %d", f.n, t, f.log, f.fields, f.base, f.at)
}

// rank orders floors for the script that never lowers one.
func (f floor) rank() int64 {
	if f.taint {
		return 2*f.n + 1
	}
	return 2 * f.n
}

// signFloor returns f's stored form for kind and id.
func (b *base) signFloor(kind, id string, f floor) string {
	body := f.body()
	return body + " " + hex.EncodeToString(b.mac(kind+" floor", id, []byte(body)))
}

// openFloor parses and checks a stored floor.
func (b *base) openFloor(kind, id, raw string) (floor, bool) {
	i := strings.LastIndexByte(raw, ' ')
	if i < 0 || !hmacEqualHex(raw[i+1:], hex.EncodeToString(b.mac(kind+" floor", id, []byte(raw[:i])))) {
		return floor{}, false
	}
	var f floor
	var t int
	if _, err := fmt.Sscanf(raw[:i], "%d %d %d %d %d %d", &f.n, &t, &f.log, &f.fields, &f.base, &f.at); err != nil {
		return floor{}, false
	}
	f.taint, f.exists = t == 1, true
	return f, true
}

// checkFloor compares c, read from Redis at now, with its stored floor
// raw ("" for none) and returns the floor and, when they disagree, why.
// A count without a floor is taken as it is when tofu is set (or
// Config.AcceptUnsigned).
func (b *base) checkFloor(kind, id string, c tapCount, raw string, now time.Time, tofu bool) (floor, string) {
	if raw == "" {
		if c.exists && !tofu && !b.cfg.AcceptUnsigned {
			return floor{}, "it has no signed floor (its floor was deleted in Redis, or it was written before floors; DLQBOT_ACCEPT_UNSIGNED=true reads records from before the upgrade)"
		}
		return floor{}, ""
	}
	f, ok := b.openFloor(kind, id, raw)
	switch {
	case !ok:
		return f, "its floor's signature does not match (changed in Redis, or signed with another key)"
	case f.taint:
		return f, "dlqbot found its count lowered or deleted in Redis earlier, so no count it holds can be trusted"
	case !c.exists && f.n == 0 && f.log == 0 && f.fields == 0:
		return f, "" // a floor of nothing: written before a first write
	case !c.exists:
		if keep := b.cfg.retentionMs(); keep > 0 && now.UnixMilli() >= f.at+keep-floorClock.Milliseconds() {
			return f, "" // expired after its last write, as its floor will
		}
		return f, fmt.Sprintf("it is missing while its signed floor counts %d (deleted in Redis)", f.n)
	case c.n < f.n:
		return f, fmt.Sprintf("it counts %d, below its signed floor of %d (lowered in Redis)", c.n, f.n)
	case c.log < f.log:
		return f, fmt.Sprintf("its log holds %d events, below its signed floor of %d (deleted in Redis)", c.log, f.log)
	case c.fields < f.fields:
		return f, fmt.Sprintf("it has %d fields, below its signed floor of %d (deleted in Redis)", c.fields, f.fields)
	case f.base >= 0 && c.base != f.base:
		return f, fmt.Sprintf("its baseline is %d, not the %d its signed floor holds (changed in Redis)", c.base, f.base)
	}
	return f, ""
}

// floorScript writes a floor unless the one stored ranks higher.
//
//	KEYS[1] the floor; ARGV[1] its stored form, ARGV[2] its rank,
//	ARGV[3] its time to live in ms (0: none)
//
// A stored floor that does not parse is replaced (its writer reported it).
var floorScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local n, t = string.match(cur, '^(%d+) (%d) ')
  if n and tonumber(n) * 2 + tonumber(t) > tonumber(ARGV[2]) then return 0 end
end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
`)

// writeFloor queues the write of f as kind and id's floor at key.
func (b *base) writeFloor(ctx context.Context, sp *scriptPipe, key, kind, id string, f floor) {
	ttl := int64(0)
	if keep := b.cfg.retentionMs(); keep > 0 {
		ttl = keep + floorSlack.Milliseconds()
	}
	sp.Script(ctx, floorScript, []string{key}, b.signFloor(kind, id, f), f.rank(), ttl)
}

// countMarks remembers the highest count this process has seen of each
// record, and until when that count could not have expired: a read
// issued after it saw one finds no lower count unless the record was
// written back or lowered in Redis (reads issued before are not compared,
// see highWater).
type countMarks struct {
	mu   sync.Mutex
	tick int64
	seen map[string]countMark
}

type countMark struct{ n, tick, until int64 }

// start returns the tick a read is issued at.
func (m *countMarks) start() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tick
}

// check refuses count n of key, read at now by a read issued at start,
// when it is below one seen before that could not have expired; it
// remembers n otherwise, as living until until (unix ms, 0: forever).
func (m *countMarks) check(key string, n, start, now, until int64) (seen int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil || len(m.seen) >= maxHighWater {
		m.seen = map[string]countMark{}
	}
	s := m.seen[key]
	switch {
	case n < s.n && s.tick <= start && (s.until == 0 || now < s.until):
		return s.n, false
	case n >= s.n:
		m.tick++
		m.seen[key] = countMark{n: n, tick: m.tick, until: until}
	}
	return n, true
}

// verifyCount checks a count read at now (issued at start) against its
// floor raw and this process's memory, and refuses it (reported) when
// either shows it lowered or deleted. until is when the count expires
// (unix ms, 0: never).
func (b *base) verifyCount(kind, id string, c tapCount, raw string, start int64, now time.Time, until int64) error {
	if len(b.cfg.SigningKey) == 0 {
		return nil
	}
	if _, why := b.checkFloor(kind, id, c, raw, now, false); why != "" {
		return b.refuse(kind, id, why)
	}
	if seen, ok := b.counts.check(kind+"\x00"+id, c.n, start, now.UnixMilli(), until); !ok {
		return b.refuse(kind, id, fmt.Sprintf("it counts %d, below the %d this dlqbot read or wrote before (an older copy written back in Redis, or lowered)", c.n, seen))
	}
	return nil
}

// expiresAt is when a key with time to live ttl (as PTTL answers) read at
// now expires, in unix ms (0: never, or missing).
func expiresAt(now time.Time, ttl time.Duration) int64 {
	if ttl <= 0 {
		return 0
	}
	return now.Add(ttl).UnixMilli()
}

// atoi64 parses a Redis reply's integer, 0 when it is not one.
func atoi64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}
