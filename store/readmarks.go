package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.ReadMarks = (*ReadMarks)(nil)

// ReadMarks remembers, per queue, what the last reads left on its messages
// (engine.ReadMarks), so that every replica budgets reads of a quorum DLQ
// alike.
type ReadMarks struct{ b *base }

// ReadMarks returns the read marks (engine.ReadMarks).
func (s *Store) ReadMarks() *ReadMarks { return &ReadMarks{s.b} }

// A read mark decides how many more reads of a quorum DLQ the budget
// allows, so a store with a key signs it: the hash's "sig" field is the
// MAC of the queue, count, time and reads (signing.go), written with them
// and checked on every read. A mark that fails its check is refused
// (SignatureError, kind "read mark"): the budget of that queue cannot be
// told, so the queue is not read until the mark is deleted (a fresh start)
// or expires; never read as if it were true. The mark is computed in Go
// (the key never reaches Redis) and written by compare-and-set.

// fieldMarkSig is a read mark's MAC.
const fieldMarkSig = "sig"

// markFields is what a read of a mark asks for, in order.
var markFields = []string{"count", "at", "reads", fieldMarkSig}

// markCASTries bounds the compare-and-set retries of one RecordRead.
const markCASTries = 8

// recordReadScript writes a mark if it still holds what was read.
//
//	KEYS[1] the mark
//	ARGV[1..4] count, at, reads and sig as read ("" for a missing field),
//	ARGV[5..8] the new count, at, reads and sig ("" without a key),
//	ARGV[9] retention in ms (0: none)
//
// It returns 1 when it wrote the mark, 0 when the mark changed since.
var recordReadScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'count', 'at', 'reads', 'sig')
for i = 1, 4 do
  if (cur[i] or '') ~= ARGV[i] then return 0 end
end
redis.call('HSET', KEYS[1], 'count', ARGV[5], 'at', ARGV[6], 'reads', ARGV[7])
if ARGV[8] == '' then redis.call('HDEL', KEYS[1], 'sig') else redis.call('HSET', KEYS[1], 'sig', ARGV[8]) end
if tonumber(ARGV[9]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[9]) end
return 1
`)

// RecordRead stores a read of queue (see engine.ReadMarks). A partial read
// of a queue whose mark fails its check is refused (its count cannot be
// raised from an untrusted one); a whole read replaces any mark.
func (m *ReadMarks) RecordRead(ctx context.Context, vhost, queue string, mk engine.ReadMark, whole bool) error {
	at := mk.At
	if at.IsZero() {
		at = m.b.now()
	}
	key := m.b.k.readMark(vhost, queue)
	for range markCASTries {
		raw, err := m.b.rdb.HMGet(ctx, key, markFields...).Result()
		if err != nil {
			return fail(err, "record read of %s", queue)
		}
		old := make([]any, 4)
		for i, v := range raw {
			s, _ := v.(string)
			old[i] = s
		}
		next := engine.ReadMark{Count: mk.Count, At: at, Reads: 1}
		if !whole {
			prev, ok, err := m.open(vhost, queue, raw)
			if err != nil {
				return err
			}
			if ok {
				next.Count, next.Reads = max(next.Count, prev.Count), prev.Reads+1
			}
		}
		args := append(old, next.Count, next.At.UnixMilli(), next.Reads, m.sig(vhost, queue, next), m.b.cfg.retentionMs())
		n, err := recordReadScript.Run(ctx, m.b.rdb, []string{key}, args...).Int()
		if err != nil {
			return fail(err, "record read of %s", queue)
		}
		if n == 1 {
			return nil
		}
	}
	return fmt.Errorf("store: record read of %s: its mark kept changing (%d tries)", queue, markCASTries)
}

// sig is a mark's MAC in hex ("" without a key).
func (m *ReadMarks) sig(vhost, queue string, mk engine.ReadMark) string {
	if len(m.b.cfg.SigningKey) == 0 {
		return ""
	}
	msg := fmt.Sprintf("%d\x00%d\x00%d", mk.Count, mk.At.UnixMilli(), mk.Reads)
	return hex.EncodeToString(m.b.mac("read mark", vhost+"/"+queue, []byte(msg)))
}

// open reads and checks the values of an HMGET of markFields; ok is false
// when there is no mark.
func (m *ReadMarks) open(vhost, queue string, raw []any) (engine.ReadMark, bool, error) {
	str := func(i int) string { s, _ := raw[i].(string); return s }
	if raw[0] == nil && raw[1] == nil && raw[2] == nil && raw[3] == nil {
		return engine.ReadMark{}, false, nil
	}
	count, err1 := strconv.Atoi(str(0))
	ms, err2 := strconv.ParseInt(str(1), 10, 64)
	reads, err3 := strconv.Atoi(str(2))
	mk := engine.ReadMark{Count: count, Reads: reads, At: time.UnixMilli(ms)}
	name := vhost + "/" + queue
	switch sig := str(3); {
	case sig == "":
		if err := m.b.unsigned("read mark", name); err != nil {
			return mk, false, err
		}
	case len(m.b.cfg.SigningKey) == 0:
		return mk, false, m.b.refuse("read mark", name, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	case err1 != nil || err2 != nil || err3 != nil || !hmacEqualHex(sig, m.sig(vhost, queue, mk)):
		return mk, false, m.b.refuse("read mark", name, "it does not match its MAC (changed in Redis, or signed with another key): the queue's read budget cannot be told, so it is not read until the mark ("+m.b.k.readMark(vhost, queue)+") is deleted or expires")
	}
	return mk, true, nil
}

// LastRead returns queue's mark; ok is false when none is recorded. A mark
// that fails its check is refused.
func (m *ReadMarks) LastRead(ctx context.Context, vhost, queue string) (engine.ReadMark, bool, error) {
	raw, err := m.b.rdb.HMGet(ctx, m.b.k.readMark(vhost, queue), markFields...).Result()
	if err != nil {
		return engine.ReadMark{}, false, fail(err, "last read of %s", queue)
	}
	return m.open(vhost, queue, raw)
}
