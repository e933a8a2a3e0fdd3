package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.TapGaps = (*TapGaps)(nil)

// maxTapGaps is how many gaps a DLQ's record keeps (the oldest go first).
const maxTapGaps = 100

// TapGaps records, per DLQ, the windows in which its tap was missing
// (engine.TapGaps). It is one hash per DLQ: field the gap's start (unix
// ms), value its end (unix ms, 0 while the tap is still gone).
type TapGaps struct{ b *base }

// TapGaps returns the record of tap losses (engine.TapGaps).
func (s *Store) TapGaps() *TapGaps { return &TapGaps{s.b} }

// addTapGapScript records one gap.
//
//	KEYS[1] the DLQ's gap hash
//	ARGV[1] from (unix ms), ARGV[2] to (unix ms, 0: still gone),
//	ARGV[3] retention in ms (0: none), ARGV[4] the cap on gaps kept
//
// An open gap merges into the open one (the earlier start wins), and is
// dropped when a closed gap ending at or after its start covers it; a
// closed gap closes the open one (the earlier start wins) or is added.
// The oldest gaps beyond the cap are removed.
var addTapGapScript = redis.NewScript(`
local h, from, to = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local all = redis.call('HGETALL', h)
local open, lastEnd = nil, -1
for i = 1, #all, 2 do
  local f, t = tonumber(all[i]), tonumber(all[i+1])
  if t == 0 then open = f elseif t > lastEnd then lastEnd = t end
end
if to == 0 then
  if open then
    if from < open then redis.call('HDEL', h, open); redis.call('HSET', h, from, 0) end
  elseif from > lastEnd then
    redis.call('HSET', h, from, 0)
  end
else
  if open then
    redis.call('HDEL', h, open)
    if open < from then from = open end
  end
  local cur = tonumber(redis.call('HGET', h, from) or '0')
  if to > cur then redis.call('HSET', h, from, to) end
end
local n = redis.call('HLEN', h)
if n > tonumber(ARGV[4]) then
  local fs = redis.call('HKEYS', h)
  table.sort(fs, function(a, b) return tonumber(a) < tonumber(b) end)
  for i = 1, n - tonumber(ARGV[4]) do redis.call('HDEL', h, fs[i]) end
end
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', h, ARGV[3]) end
return 1
`)

// AddTapGap records a window without dlq's tap (see engine.TapGaps).
func (g *TapGaps) AddTapGap(ctx context.Context, dlq string, gap engine.TapGap) error {
	if dlq == "" {
		return errors.New("store: add tap gap: empty dlq")
	}
	if gap.From.IsZero() {
		return fmt.Errorf("store: add tap gap of %s: no start", dlq)
	}
	to := int64(0)
	if !gap.To.IsZero() {
		to = max(gap.To.UnixMilli(), gap.From.UnixMilli())
	}
	err := addTapGapScript.Run(ctx, g.b.rdb, []string{g.b.k.tapGap(dlq)},
		gap.From.UnixMilli(), to, g.b.cfg.retentionMs(), maxTapGaps).Err()
	if err != nil {
		return fail(err, "add tap gap of %s", dlq)
	}
	return nil
}

// TapGaps lists dlq's gaps, oldest first.
func (g *TapGaps) TapGaps(ctx context.Context, dlq string) ([]engine.TapGap, error) {
	h, err := g.b.rdb.HGetAll(ctx, g.b.k.tapGap(dlq)).Result()
	if err != nil {
		return nil, fail(err, "tap gaps of %s", dlq)
	}
	out := make([]engine.TapGap, 0, len(h))
	for f, v := range h {
		from, err1 := strconv.ParseInt(f, 10, 64)
		to, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		gap := engine.TapGap{From: time.UnixMilli(from)}
		if to > 0 {
			gap.To = time.UnixMilli(to)
		}
		out = append(out, gap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].From.Before(out[j].From) })
	return out, nil
}
