package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// A window of copies is written by one Lua script: it checks the run's
// fence (the lease names the owner, the replay's epoch is the run's),
// refuses the ids another replay sent or is sending since the preview
// (the DLQ's sent index, Psent:<dlq>, names them), marks the others in
// that index as this replay's, and appends the window's intent record to
// the replay's ledger. The index is written at intent, not at confirm, so
// that two replays' windows for one id cannot both pass: whichever runs
// second finds the first one's mark.
//
// The index is a per-DLQ key and the fence and ledger are the replay's
// (hash tag {<replay>}), so in Redis Cluster they are in different slots
// and no script may touch both. There the window is two scripts, run in
// order: windowMarkScript on the index (refuse and mark: atomic for the
// DLQ, which is what keeps each id with one replay), then
// windowRecordScript in the replay's slot (fence and record). A window the
// fence then refuses has published nothing; its marks are withdrawn
// (unmarkScript) and, should that fail or the process die in between,
// they stay as marks of a replay that sent nothing of them: other replays
// refuse those ids as this replay's (never a copy twice; at worst a copy
// not sent by either, reported as replayed elsewhere). On a single Redis
// (every other client) the window is the one script windowScript, whose
// fence comes first and refuses the whole window before anything is
// written.

// luaFence, luaMark and luaRecord are the parts the window scripts are
// made of. ARGV is the same for all three scripts:
//
//	ARGV[1] replay id, ARGV[2] owner, ARGV[3] epoch, ARGV[4] now (unix ms),
//	ARGV[5] since (unix ms): sends by others before it do not refuse,
//	ARGV[6] retention in ms (0: none), ARGV[7] the intent record's head
//	(JSON up to the entries' "["), ARGV[8] "1" for a resend (fence and
//	mark, never refuse, record nothing), then pairs of message id and its
//	entry (JSON)
const luaFence = `
local function fenced(lease, replay, owner, epoch)
  if redis.call('GET', lease) ~= owner then return 'lease' end
  if redis.call('HGET', replay, 'epoch') ~= epoch then return 'epoch' end
  return false
end
`

// luaMark refuses and marks ids in the index: each id's value lists the
// latest replays that sent it, newest first, at most five:
// "<replay>:<ms>:<copies>,…". An id whose value names another replay at or
// after since is refused (skip[id] = that replay); each other id's value
// gets this replay in front, at now, with the copies it intends added to
// those it had. The index is read
// and written a thousand ids per command (HMGET, HSET), not per id.
const luaMark = `
local function mark(index, rid, now, since, resend)
  local ids, n = {}, {}
  for i = 9, #ARGV, 2 do
    local id = ARGV[i]
    if n[id] == nil then n[id] = 0 ids[#ids+1] = id end
    n[id] = n[id] + 1
  end
  local refused, skip = {}, {}
  for s = 1, #ids, 1000 do
    local chunk = {unpack(ids, s, math.min(s + 999, #ids))}
    local cur = redis.call('HMGET', index, unpack(chunk))
    local sets = {}
    for j, id in ipairs(chunk) do
      local v, by = cur[j], nil
      if v and not resend then
        for part in string.gmatch(v, '[^,]+') do
          local r, ms = string.match(part, '^([^:]+):(%d+):%d+$')
          if r and r ~= rid and tonumber(ms) >= since then by = r break end
        end
      end
      if by then
        skip[id] = by
        refused[#refused+1] = id
        refused[#refused+1] = by
      else
        local c, rest = n[id], {}
        if v then
          for part in string.gmatch(v, '[^,]+') do
            local r, k = string.match(part, '^([^:]+):[^:]+:(%d+)$')
            if r == rid then c = c + tonumber(k) elseif #rest < 4 then rest[#rest+1] = part end
          end
        end
        local val = rid .. ':' .. now .. ':' .. c
        if #rest > 0 then val = val .. ',' .. table.concat(rest, ',') end
        sets[#sets+1] = id
        sets[#sets+1] = val
      end
    end
    if #sets > 0 then redis.call('HSET', index, unpack(sets)) end
  end
  if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', index, ARGV[6]) end
  return refused, skip
end
`

// luaRecord appends the intent record of the entries not in skip, and
// sets the ledger's layout on its first record (see Ledger.EntriesPage).
const luaRecord = `
local function record(ledger, acks, skip)
  local es = {}
  for i = 9, #ARGV, 2 do
    if not skip[ARGV[i]] then es[#es+1] = ARGV[i+1] end
  end
  if #es == 0 then return end
  if redis.call('HEXISTS', acks, 'layout') == 0 then
    local layout = 'mixed'
    if redis.call('LLEN', ledger) == 0 then layout = '2' end
    redis.call('HSET', acks, 'layout', layout)
  end
  redis.call('RPUSH', ledger, ARGV[7] .. table.concat(es, ',') .. ']}')
  if tonumber(ARGV[6]) > 0 then
    redis.call('PEXPIRE', ledger, ARGV[6])
    redis.call('PEXPIRE', acks, ARGV[6])
  end
end
`

// windowScript writes a window on a single Redis.
//
//	KEYS[1] the replay's lease, KEYS[2] the replay hash, KEYS[3] its
//	ledger, KEYS[4] its acks, KEYS[5] the DLQ's sent index
//	ARGV as for luaFence
//
// It returns {0, "lease"|"epoch"} when the fence refuses the window
// (nothing written), else 1 followed by pairs of refused id and the
// replay that sent it.
var windowScript = redis.NewScript(luaFence + luaMark + luaRecord + `
local f = fenced(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if f then return {0, f} end
local resend = ARGV[8] == '1'
local refused, skip = mark(KEYS[5], ARGV[1], ARGV[4], tonumber(ARGV[5]), resend)
if not resend then record(KEYS[3], KEYS[4], skip) end
table.insert(refused, 1, 1)
return refused
`)

// windowMarkScript is the index half of a window in Redis Cluster.
//
//	KEYS[1] the DLQ's sent index
//	ARGV as for luaFence
//
// It returns 1 followed by pairs of refused id and the replay that sent it.
var windowMarkScript = redis.NewScript(luaMark + `
local refused = mark(KEYS[1], ARGV[1], ARGV[4], tonumber(ARGV[5]), ARGV[8] == '1')
table.insert(refused, 1, 1)
return refused
`)

// windowRecordScript is the replay's half of a window in Redis Cluster,
// given only the entries windowMarkScript did not refuse.
//
//	KEYS[1] the replay's lease, KEYS[2] the replay hash, KEYS[3] its
//	ledger, KEYS[4] its acks
//	ARGV as for luaFence
//
// It returns {0, "lease"|"epoch"} when the fence refuses the window
// (nothing written), else {1}.
var windowRecordScript = redis.NewScript(luaFence + luaRecord + `
local f = fenced(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if f then return {0, f} end
if ARGV[8] ~= '1' then record(KEYS[3], KEYS[4], {}) end
return {1}
`)

// unmarkScript withdraws a replay's marks from a DLQ's sent index: copies
// it intended and certainly did not send.
//
//	KEYS[1] the DLQ's sent index
//	ARGV[1] replay id, then pairs of message id and copies to withdraw
//
// The replay's part of each id's value loses those copies, and goes when
// none is left; an id with no part left is deleted.
var unmarkScript = redis.NewScript(`
local key, rid = KEYS[1], ARGV[1]
for i = 2, #ARGV, 2 do
  local id, n = ARGV[i], tonumber(ARGV[i+1])
  local cur = redis.call('HGET', key, id)
  if cur then
    local parts = {}
    for part in string.gmatch(cur, '[^,]+') do
      local r, ms, c = string.match(part, '^([^:]+):([^:]+):(%d+)$')
      if r == rid then
        c = tonumber(c) - n
        if c > 0 then parts[#parts+1] = r .. ':' .. ms .. ':' .. c end
      else
        parts[#parts+1] = part
      end
    end
    if #parts == 0 then redis.call('HDEL', key, id) else redis.call('HSET', key, id, table.concat(parts, ',')) end
  end
end
return 1
`)

// IntendWindow writes w: see engine.Ledger. A window refused by its fence
// is engine.ErrLeaseLost, and nothing of it is recorded.
func (l *Ledger) IntendWindow(ctx context.Context, w engine.Window) (map[string]string, error) {
	if err := checkTag("replay id", w.ReplayID); err != nil {
		return nil, fmt.Errorf("store: ledger window: %w", err)
	}
	if len(w.Entries) == 0 {
		return map[string]string{}, nil
	}
	args, err := l.windowArgs(w)
	if err != nil {
		return nil, fmt.Errorf("store: ledger window of %s: %w", w.ReplayID, err)
	}
	rk := []string{l.b.k.lease(w.ReplayID), l.b.k.replay(w.ReplayID), l.b.k.ledger(w.ReplayID), l.b.k.acks(w.ReplayID)}
	index := l.b.k.sent(w.DLQ)
	if _, cluster := l.b.rdb.(*redis.ClusterClient); !cluster {
		res, err := l.run(ctx, windowScript, append(rk, index), args)
		if err != nil {
			return nil, fail(err, "ledger window of %s", w.ReplayID)
		}
		return windowResult(w, res)
	}
	res, err := l.run(ctx, windowMarkScript, []string{index}, args)
	if err != nil {
		return nil, fail(err, "ledger window of %s: mark", w.ReplayID)
	}
	refused, _ := windowResult(w, res)
	kept := append(make([]any, 0, len(args)), args[:8]...)
	for i := 8; i+1 < len(args); i += 2 {
		if _, no := refused[args[i].(string)]; !no {
			kept = append(kept, args[i], args[i+1])
		}
	}
	if len(kept) == 8 {
		return refused, nil
	}
	res, err = l.run(ctx, windowRecordScript, rk, kept)
	if err == nil {
		if _, ferr := windowResult(w, res); ferr != nil {
			err = ferr
		}
	}
	if err != nil {
		// Nothing of the window will be published: withdraw its marks.
		if uerr := l.unmark(ctx, w.ReplayID, w.DLQ, kept[8:]); uerr != nil {
			err = fmt.Errorf("%w (and withdrawing its marks: %v)", err, uerr)
		}
	}
	if err != nil {
		return nil, fail(err, "ledger window of %s: record", w.ReplayID)
	}
	return refused, nil
}

// windowArgs are the window scripts' ARGV (see luaFence).
func (l *Ledger) windowArgs(w engine.Window) ([]any, error) {
	now := l.b.now()
	at := now
	if len(w.Entries) > 0 && !w.Entries[0].At.IsZero() {
		at = w.Entries[0].At
	}
	q, err := json.Marshal(w.DLQ)
	if err != nil {
		return nil, err
	}
	head := `{"k":"i","a":` + strconv.FormatInt(at.UnixMilli(), 10) + `,"q":` + string(q) + `,"e":[`
	resend := "0"
	if w.Resend {
		resend = "1"
	}
	args := make([]any, 0, 8+2*len(w.Entries))
	args = append(args, w.ReplayID, w.Owner, strconv.FormatInt(w.Epoch, 10), strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(w.Since.UnixMilli(), 10), l.b.cfg.retentionMs(), head, resend)
	m := l.b.ledgerMACer()
	for _, e := range w.Entries {
		if e.ID == "" {
			return nil, fmt.Errorf("empty message id")
		}
		le := logEntry{ID: e.ID, Target: e.Target, Seq: e.Seq, Copy: e.Copy}
		if m != nil {
			le.MAC = m.entry(w.ReplayID, "i", at.UnixMilli(), w.DLQ, le)
		}
		rec, err := json.Marshal(le)
		if err != nil {
			return nil, err
		}
		args = append(args, e.ID, string(rec))
	}
	return args, nil
}

// run calls s by SHA, loading it when Redis does not know it, and
// returns its answer as a list.
func (l *Ledger) run(ctx context.Context, s *redis.Script, keys []string, args []any) ([]any, error) {
	cmd, err := l.call(ctx, s, keys, args)
	if err != nil {
		return nil, err
	}
	return cmd.Slice()
}

// call calls s by SHA, loading it when Redis does not know it.
func (l *Ledger) call(ctx context.Context, s *redis.Script, keys []string, args []any) (*redis.Cmd, error) {
	sp := l.b.pipeline()
	cmd := sp.Script(ctx, s, keys, args...)
	return cmd, sp.Exec(ctx)
}

// windowResult reads a window script's answer: the refused ids, or
// engine.ErrLeaseLost when the fence refused the window.
func windowResult(w engine.Window, res []any) (map[string]string, error) {
	if len(res) == 0 {
		return nil, fmt.Errorf("empty answer")
	}
	if ok, _ := res[0].(int64); ok != 1 {
		why := ""
		if len(res) > 1 {
			why, _ = res[1].(string)
		}
		return nil, fmt.Errorf("window of %s for %s (epoch %d): the %s is another's: %w", w.ReplayID, w.Owner, w.Epoch, why, engine.ErrLeaseLost)
	}
	refused := map[string]string{}
	for i := 1; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		by, _ := res[i+1].(string)
		refused[id] = by
	}
	return refused, nil
}

// unmark withdraws replay's marks on dlq's sent index for the (id, entry)
// pairs of args: one copy per pair.
func (l *Ledger) unmark(ctx context.Context, replay, dlq string, pairs []any) error {
	n := map[string]int{}
	var order []string
	for i := 0; i+1 < len(pairs); i += 2 {
		id := pairs[i].(string)
		if n[id] == 0 {
			order = append(order, id)
		}
		n[id]++
	}
	return l.unmarkIDs(ctx, replay, dlq, order, n)
}

// unmarkIDs withdraws n[id] copies of replay from dlq's sent index for
// each id of order.
func (l *Ledger) unmarkIDs(ctx context.Context, replay, dlq string, order []string, n map[string]int) error {
	if len(order) == 0 {
		return nil
	}
	args := make([]any, 0, 1+2*len(order))
	args = append(args, replay)
	for _, id := range order {
		args = append(args, id, n[id])
	}
	_, err := l.call(ctx, unmarkScript, []string{l.b.k.sent(dlq)}, args)
	return err
}
