package store

import (
	"context"
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

// recordReadScript stores one read's mark.
//
//	KEYS[1] the mark
//	ARGV[1] count, ARGV[2] unix ms, ARGV[3] "1" for a whole read,
//	ARGV[4] retention in ms (0: none)
//
// A whole read replaces the mark; a partial one raises its count (never
// lowers it). It returns the count stored.
var recordReadScript = redis.NewScript(`
local count = tonumber(ARGV[1])
local reads = 1
if ARGV[3] ~= '1' then
  local old = redis.call('HMGET', KEYS[1], 'count', 'reads')
  if old[1] and tonumber(old[1]) > count then count = tonumber(old[1]) end
  if old[2] then reads = tonumber(old[2]) + 1 end
end
redis.call('HSET', KEYS[1], 'count', count, 'at', ARGV[2], 'reads', reads)
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return count
`)

// RecordRead stores a read of queue (see engine.ReadMarks).
func (m *ReadMarks) RecordRead(ctx context.Context, vhost, queue string, mk engine.ReadMark, whole bool) error {
	at := mk.At
	if at.IsZero() {
		at = m.b.now()
	}
	w := "0"
	if whole {
		w = "1"
	}
	err := recordReadScript.Run(ctx, m.b.rdb, []string{m.b.k.readMark(vhost, queue)},
		mk.Count, at.UnixMilli(), w, m.b.cfg.retentionMs()).Err()
	if err != nil {
		return fail(err, "record read of %s", queue)
	}
	return nil
}

// LastRead returns queue's mark; ok is false when none is recorded.
func (m *ReadMarks) LastRead(ctx context.Context, vhost, queue string) (engine.ReadMark, bool, error) {
	h, err := m.b.rdb.HGetAll(ctx, m.b.k.readMark(vhost, queue)).Result()
	if err != nil {
		return engine.ReadMark{}, false, fail(err, "last read of %s", queue)
	}
	if len(h) == 0 {
		return engine.ReadMark{}, false, nil
	}
	count, _ := strconv.Atoi(h["count"])
	reads, _ := strconv.Atoi(h["reads"])
	ms, _ := strconv.ParseInt(h["at"], 10, 64)
	return engine.ReadMark{Count: count, Reads: reads, At: time.UnixMilli(ms)}, true, nil
}
