package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// A window's takes decide whether a requester may approve their own
// preview: a take deleted, or its count lowered, lets one person
// self-approve past the policy. With a signing key, the window's zset
// therefore also holds a seal, a member scored +inf,
// "seal <seq> <MAC>": the HMAC of the window's name, a sequence number
// that grows with every write, and every take in the zset (member and
// score). Go reads the window, checks the seal, decides, and writes the
// take, the expired takes' removal and the next seal in one script that
// does nothing when the seal is no longer the one read (another writer
// came first: Go reads again). A take deleted, added or changed, or a
// seal deleted beside takes, refuses every take of the window
// (SignatureError, kind "window") until it expires or is deleted.
//
// What the seal cannot show: the whole key deleted, which reads as a
// window nobody took from (or one that expired) — anything kept in Redis
// to remember it could be deleted with it; and the zset written back as
// it was earlier (fewer takes, their seal), which each process refuses
// when it has read or written a later sequence number of that window
// (as with replay versions) and a process that never did trusts.

// windowSealPrefix starts a window's seal member; no take's member
// ("<id>:<n>") starts so.
const windowSealPrefix = "seal "

// maxWindowTries bounds the reads of one take that find the window
// written meanwhile.
const maxWindowTries = 8

// sealedTakeScript writes a take and the window's next seal.
//
//	KEYS[1] the window
//	ARGV[1] the seal read ("": none), ARGV[2] the next seal, ARGV[3]
//	takes scored at most this are dropped (unix ms), ARGV[4] the take's
//	member ("": none, a give), ARGV[5] its score (unix ms), ARGV[6] the
//	window in ms (0: keep the key's expiry), ARGV[7] a member to remove
//	("": none)
//
// It returns 0 when the window's seal is not ARGV[1] (nothing written),
// else 1.
var sealedTakeScript = redis.NewScript(`
local seals = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf')
local cur = ''
for _, m in ipairs(seals) do
  if string.sub(m, 1, 5) == 'seal ' then cur = m end
end
if cur ~= ARGV[1] then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if ARGV[1] ~= '' then redis.call('ZREM', KEYS[1], ARGV[1]) end
if ARGV[7] ~= '' then redis.call('ZREM', KEYS[1], ARGV[7]) end
if ARGV[4] ~= '' then redis.call('ZADD', KEYS[1], ARGV[5], ARGV[4]) end
redis.call('ZADD', KEYS[1], '+inf', ARGV[2])
if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[6]) end
return 1
`)

// take is one take of a window as read.
type take struct {
	member string
	at     int64 // unix ms
	n      int
}

// sealedWindow is a window read and checked.
type sealedWindow struct {
	seal  string // the seal member read, "" for none
	seq   int64
	takes []take // oldest first
}

// windowSeal is the seal member of window name at seq over takes.
func (b *base) windowSeal(name string, seq int64, takes []take) string {
	var sb strings.Builder
	sb.WriteString(strconv.FormatInt(seq, 10))
	for _, t := range takes {
		sb.WriteByte('\n')
		sb.WriteString(t.member)
		sb.WriteByte('@')
		sb.WriteString(strconv.FormatInt(t.at, 10))
	}
	return windowSealPrefix + strconv.FormatInt(seq, 10) + " " + hex.EncodeToString(b.mac("window", name, []byte(sb.String())))
}

// readWindow reads window name and checks its seal.
func (w *Windows) readWindow(ctx context.Context, name string) (sealedWindow, error) {
	start := w.b.windowSeqs.start()
	zs, err := w.b.rdb.ZRangeWithScores(ctx, w.b.k.window(name), 0, -1).Result()
	if err != nil {
		return sealedWindow{}, fail(err, "read window %s", name)
	}
	var sw sealedWindow
	for _, z := range zs {
		m, _ := z.Member.(string)
		if strings.HasPrefix(m, windowSealPrefix) {
			if sw.seal != "" {
				return sw, w.b.refuse("window", name, "it holds two seals (added in Redis)")
			}
			sw.seal = m
			continue
		}
		t := take{member: m, at: int64(z.Score)}
		if i := strings.LastIndexByte(m, ':'); i >= 0 {
			t.n, _ = strconv.Atoi(m[i+1:])
		}
		sw.takes = append(sw.takes, t)
	}
	sort.SliceStable(sw.takes, func(i, j int) bool { return sw.takes[i].at < sw.takes[j].at })
	if sw.seal == "" {
		if len(sw.takes) > 0 {
			return sw, w.b.unsigned("window", name)
		}
		return sw, nil
	}
	f := strings.Fields(sw.seal)
	if len(f) == 3 {
		sw.seq, err = strconv.ParseInt(f[1], 10, 64)
	}
	if len(f) != 3 || err != nil || !hmacEqualHex(f[2], strings.Fields(w.b.windowSeal(name, sw.seq, sw.takes))[2]) {
		return sw, w.b.refuse("window", name, "its takes do not match its seal (a take deleted, added or changed in Redis): the window cannot be trusted")
	}
	if seen, ok := w.b.windowSeqs.check(name, sw.seq, start); !ok {
		return sw, w.b.refuseAs(ErrRecordRolledBack, "window", name, fmt.Sprintf(
			"it is at write %d, older than write %d read before (an older copy written back in Redis)", sw.seq, seen))
	}
	return sw, nil
}

// writeWindow writes the window's next state: takes kept (those after
// drop), member add at now (none when ""), member remove gone. ok is
// false when another writer came first.
func (w *Windows) writeWindow(ctx context.Context, name string, sw sealedWindow, drop int64, add take, remove string, window time.Duration) (bool, error) {
	var next []take
	for _, t := range sw.takes {
		if t.at > drop && t.member != remove {
			next = append(next, t)
		}
	}
	if add.member != "" {
		next = append(next, add)
	}
	sort.SliceStable(next, func(i, j int) bool { return next[i].at < next[j].at })
	seal := w.b.windowSeal(name, sw.seq+1, next)
	ok, err := sealedTakeScript.Run(ctx, w.b.rdb, []string{w.b.k.window(name)}, sw.seal, seal,
		drop, add.member, add.at, window.Milliseconds(), remove).Int()
	if err != nil {
		return false, err
	}
	if ok == 1 {
		w.b.windowSeqs.check(name, sw.seq+1, w.b.windowSeqs.start())
	}
	return ok == 1, nil
}

// takeSealed is Take with a signing key.
func (w *Windows) takeSealed(ctx context.Context, name string, n, limit int, window time.Duration) (engine.WindowTake, error) {
	id := engine.NewID("w")
	for try := 0; try < maxWindowTries; try++ {
		sw, err := w.readWindow(ctx, name)
		if err != nil {
			return engine.WindowTake{}, err
		}
		now := w.b.now().UnixMilli()
		drop := now - window.Milliseconds()
		used, oldest := 0, int64(-1)
		for _, t := range sw.takes {
			if t.at > drop {
				used += t.n
				if oldest < 0 {
					oldest = t.at
				}
			}
		}
		if used+n > limit {
			wait := window
			if oldest >= 0 {
				wait = time.Duration(oldest+window.Milliseconds()-now) * time.Millisecond
			}
			return engine.WindowTake{Used: used, RetryAfter: wait}, nil
		}
		member := id + ":" + strconv.Itoa(n)
		ok, err := w.writeWindow(ctx, name, sw, drop, take{member: member, at: now, n: n}, "", window)
		if err != nil {
			return engine.WindowTake{}, fail(err, "take from window %s", name)
		}
		if ok {
			return engine.WindowTake{OK: true, Used: used, ID: member}, nil
		}
	}
	return engine.WindowTake{}, fmt.Errorf("store: take from window %s: written by others under %d reads", name, maxWindowTries)
}

// giveSealed is Give with a signing key.
func (w *Windows) giveSealed(ctx context.Context, name, id string) error {
	for try := 0; try < maxWindowTries; try++ {
		sw, err := w.readWindow(ctx, name)
		if err != nil {
			return err
		}
		held := false
		for _, t := range sw.takes {
			held = held || t.member == id
		}
		if !held {
			return nil
		}
		// Nothing expires here (-1: no take is dropped by time), and the
		// key keeps its expiry.
		ok, err := w.writeWindow(ctx, name, sw, -1<<62, take{}, id, 0)
		if err != nil {
			return fail(err, "give back %s to window %s", id, name)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("store: give back %s to window %s: written by others under %d reads", id, name, maxWindowTries)
}
