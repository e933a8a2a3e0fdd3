package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// prevIndexScript is the previous release's index script, kept as the
// reference the window layout is measured and checked against: it wrote
// the DLQ's sent index at confirm, one HGET and one HSET per id.
//
//	KEYS[1] the DLQ's sent hash
//	ARGV[1] retention in ms (0: none), ARGV[2] replay id, ARGV[3] unix ms,
//	then pairs of message id and copies sent
var prevIndexScript = redis.NewScript(`
local key, rid, ms = KEYS[1], ARGV[2], ARGV[3]
for i = 4, #ARGV, 2 do
  local id, n = ARGV[i], tonumber(ARGV[i+1])
  local rest = {}
  local cur = redis.call('HGET', key, id)
  if cur then
    for part in string.gmatch(cur, '[^,]+') do
      local r, c = string.match(part, '^([^:]+):[^:]+:(%d+)$')
      if r == rid then n = n + tonumber(c) elseif #rest < 4 then rest[#rest+1] = part end
    end
  end
  local v = rid .. ':' .. ms .. ':' .. n
  if #rest > 0 then v = v .. ',' .. table.concat(rest, ',') end
  redis.call('HSET', key, id, v)
end
if tonumber(ARGV[1]) > 0 then redis.call('PEXPIRE', key, ARGV[1]) end
return 1
`)

// prevWrite writes entries of one replay, DLQ and time as the previous
// release did: a JSON record (RPUSH, PEXPIRE) and, for confirms, the
// index at confirm, in one pipeline.
func prevWrite(ctx context.Context, l *Ledger, kind string, entries []engine.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	e0 := entries[0]
	at := e0.At
	if at.IsZero() {
		at = l.b.now()
	}
	recs := make([]logEntry, len(entries))
	copies, order := map[string]int{}, []string{}
	for i, e := range entries {
		recs[i] = logEntry{ID: e.ID, Target: e.Target, Seq: e.Seq, Copy: e.Copy}
		if copies[e.ID] == 0 {
			order = append(order, e.ID)
		}
		copies[e.ID]++
	}
	rec, err := json.Marshal(logRec{Kind: kind, At: at.UnixMilli(), DLQ: e0.DLQ, Entries: recs})
	if err != nil {
		return err
	}
	keep := l.b.cfg.retentionMs()
	sp := l.b.pipeline()
	sp.pipe.RPush(ctx, l.b.k.ledger(e0.ReplayID), rec)
	if keep > 0 {
		sp.pipe.PExpire(ctx, l.b.k.ledger(e0.ReplayID), time.Duration(keep)*time.Millisecond)
	}
	if kind == "c" {
		args := []any{keep, e0.ReplayID, at.UnixMilli()}
		for _, id := range order {
			args = append(args, id, copies[id])
		}
		sp.Script(ctx, prevIndexScript, []string{l.b.k.sent(e0.DLQ)}, args...)
	}
	return sp.Exec(ctx)
}
