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
//	(JSON up to the entries' "[", its seal included when signed), ARGV[8]
//	"1" for a resend (fence and mark, never refuse, record nothing),
//	ARGV[9] the position the record is sealed for ("": unsigned, no
//	position), ARGV[10] the ledger's tally after it ("": none), ARGV[11]
//	"1" when the index marks are signed, then per entry its message id,
//	the entry (JSON) and, when ARGV[11] is "1", the MAC of the id's
//	index mark (ledger_sent.go)
//
// A signed window (ARGV[9] set) is written whole or not at all: a log
// whose length is not ARGV[9] writes nothing, nor does a window with an
// id refused (ledger_seal.go).
const luaFence = `
local function fenced(lease, replay, owner, epoch)
  if redis.call('GET', lease) ~= owner then return 'lease' end
  if redis.call('HGET', replay, 'epoch') ~= epoch then return 'epoch' end
  return false
end
local function moved(ledger)
  if ARGV[9] == '' or ARGV[8] == '1' then return false end
  local n = redis.call('LLEN', ledger)
  if n ~= tonumber(ARGV[9]) then return n end
  return false
end
`

// luaMark refuses and marks ids in the index: each id's value lists the
// latest replays that sent it, newest first, at most five:
// "<replay>:<ms>:<copies>,…". An id whose value names another replay at or
// after since is refused (skip[id] = that replay); each other id's value
// gets this replay in front, at now, with the copies it intends added to
// those it had, and its MAC when signed ("<replay>:<ms>:<copies>:<MAC>").
// With all (a signed window), an id refused leaves every mark unwritten.
// The index is read and written a thousand ids per command (HMGET,
// HSET), not per id.
const luaMark = `
local function mark(index, rid, now, since, resend, all)
  local ids, n, macs = {}, {}, {}
  local st = 2
  if ARGV[11] == '1' then st = 3 end
  for i = 12, #ARGV, st do
    local id = ARGV[i]
    if n[id] == nil then
      n[id] = 0
      ids[#ids+1] = id
      if st == 3 then macs[id] = ARGV[i+2] end
    end
    n[id] = n[id] + 1
  end
  local refused, skip, sets = {}, {}, {}
  for s = 1, #ids, 1000 do
    local chunk = {unpack(ids, s, math.min(s + 999, #ids))}
    local cur = redis.call('HMGET', index, unpack(chunk))
    for j, id in ipairs(chunk) do
      local v, by = cur[j], nil
      if v and not resend then
        for part in string.gmatch(v, '[^,]+') do
          local r, ms = string.match(part, '^([^:]+):(%d+):%d+')
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
            local r, k = string.match(part, '^([^:]+):[^:]+:(%d+)')
            if r == rid then c = c + tonumber(k) elseif r and #rest < 4 then rest[#rest+1] = part end
          end
        end
        local val
        if st == 3 then val = rid .. ':' .. now .. ':' .. c .. ':' .. macs[id] else val = rid .. ':' .. now .. ':' .. c end
        if #rest > 0 then val = val .. ',' .. table.concat(rest, ',') end
        sets[#sets+1] = id
        sets[#sets+1] = val
      end
    end
  end
  if all and #refused > 0 then return refused, skip end
  for s = 1, #sets, 2000 do
    redis.call('HSET', index, unpack(sets, s, math.min(s + 1999, #sets)))
  end
  if tonumber(ARGV[6]) > 0 then redis.call('PEXPIRE', index, ARGV[6]) end
  return refused, skip
end
`

// luaRecord appends the intent record of the entries not in skip, sets
// the ledger's layout on its first record (see Ledger.EntriesPage) and
// its tally when signed.
const luaRecord = `
local function record(ledger, acks, skip)
  local es = {}
  local st = 2
  if ARGV[11] == '1' then st = 3 end
  for i = 12, #ARGV, st do
    if not skip[ARGV[i]] then es[#es+1] = ARGV[i+1] end
  end
  if #es == 0 then return end
  if redis.call('HEXISTS', acks, 'layout') == 0 then
    local layout = 'mixed'
    if redis.call('LLEN', ledger) == 0 then layout = '2' end
    redis.call('HSET', acks, 'layout', layout)
  end
  redis.call('RPUSH', ledger, ARGV[7] .. table.concat(es, ',') .. ']}')
  if ARGV[10] ~= '' then redis.call('HSET', acks, 'tally', ARGV[10]) end
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
// (nothing written), {2, length} when a signed window's log is not at its
// position (nothing written), else its code (3 when a signed window has
// ids refused: nothing written; else 1), the index's field count before
// and after, then pairs of refused id and the replay that sent it.
var windowScript = redis.NewScript(luaFence + luaMark + luaRecord + `
local f = fenced(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if f then return {0, f} end
local n = moved(KEYS[3])
if n then return {2, n} end
local resend = ARGV[8] == '1'
local all = ARGV[9] ~= '' and not resend
local h0 = redis.call('HLEN', KEYS[5])
local refused, skip = mark(KEYS[5], ARGV[1], ARGV[4], tonumber(ARGV[5]), resend, all)
local code = 1
if all and #refused > 0 then code = 3 elseif not resend then record(KEYS[3], KEYS[4], skip) end
table.insert(refused, 1, redis.call('HLEN', KEYS[5]))
table.insert(refused, 1, h0)
table.insert(refused, 1, code)
return refused
`)

// windowMarkScript is the index half of a window in Redis Cluster.
//
//	KEYS[1] the DLQ's sent index
//	ARGV as for luaFence
//
// It returns 1, the index's field count before and after, then pairs of
// refused id and the replay that sent it.
var windowMarkScript = redis.NewScript(luaMark + `
local h0 = redis.call('HLEN', KEYS[1])
local refused = mark(KEYS[1], ARGV[1], ARGV[4], tonumber(ARGV[5]), ARGV[8] == '1', false)
table.insert(refused, 1, redis.call('HLEN', KEYS[1]))
table.insert(refused, 1, h0)
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
// (nothing written), {2, length} when a signed window's log is not at its
// position (nothing written), else {1}.
var windowRecordScript = redis.NewScript(luaFence + luaRecord + `
local f = fenced(KEYS[1], KEYS[2], ARGV[2], ARGV[3])
if f then return {0, f} end
local n = moved(KEYS[3])
if n then return {2, n} end
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
// none is left; an id with no part left keeps the value "-", so that the
// index's field count never falls (its signed floor, ledger_sent.go).
var unmarkScript = redis.NewScript(`
local key, rid = KEYS[1], ARGV[1]
for i = 2, #ARGV, 2 do
  local id, n = ARGV[i], tonumber(ARGV[i+1])
  local cur = redis.call('HGET', key, id)
  if cur then
    local parts = {}
    for part in string.gmatch(cur, '[^,]+') do
      local r, ms, c, mac = string.match(part, '^([^:]+):([^:]+):(%d+)(.*)$')
      if r == rid then
        c = tonumber(c) - n
        if c > 0 then parts[#parts+1] = r .. ':' .. ms .. ':' .. c .. mac end
      elseif r then
        parts[#parts+1] = part
      end
    end
    if #parts == 0 then redis.call('HSET', key, id, '-') else redis.call('HSET', key, id, table.concat(parts, ',')) end
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
	ww, err := l.newWindow(w)
	if err != nil {
		return nil, fmt.Errorf("store: ledger window of %s: %w", w.ReplayID, err)
	}
	rk := []string{l.b.k.lease(w.ReplayID), l.b.k.replay(w.ReplayID), l.b.k.ledger(w.ReplayID), l.b.k.acks(w.ReplayID)}
	index := l.b.k.sent(w.DLQ)
	if _, cluster := l.b.rdb.(*redis.ClusterClient); !cluster {
		return l.windowOne(ctx, ww, append(rk, index))
	}
	res, floor, start, err := l.runIndexed(ctx, windowMarkScript, []string{index}, ww.args(l, 0), w.DLQ)
	if err != nil {
		return nil, fail(err, "ledger window of %s: mark", w.ReplayID)
	}
	a, err := windowResult(w, res)
	if err == nil {
		err = l.raiseSentFloor(ctx, w.DLQ, a.before, a.after, floor, start)
	}
	if err != nil {
		return nil, fail(err, "ledger window of %s: mark", w.ReplayID)
	}
	refused := a.refused
	ww.drop(refused)
	if len(ww.pairs) == 0 {
		return refused, nil
	}
	err = l.windowRecord(ctx, ww, rk)
	if err != nil {
		// Nothing of the window will be published: withdraw its marks.
		if uerr := l.unmark(ctx, w.ReplayID, w.DLQ, ww.pairs); uerr != nil {
			err = fmt.Errorf("%w (and withdrawing its marks: %v)", err, uerr)
		}
		return nil, fail(err, "ledger window of %s: record", w.ReplayID)
	}
	return refused, nil
}

// windowOne writes a window on a single Redis by windowScript: a signed
// window again at the log's length when it was not where expected, and
// without the ids refused when some were.
func (l *Ledger) windowOne(ctx context.Context, ww *window, keys []string) (map[string]string, error) {
	refused := map[string]string{}
	for try := 0; ; try++ {
		pos := l.tails.get(ww.w.ReplayID)
		res, floor, start, err := l.runIndexed(ctx, windowScript, keys, ww.args(l, pos), ww.w.DLQ)
		if err != nil {
			return nil, fail(err, "ledger window of %s", ww.w.ReplayID)
		}
		a, err := windowResult(ww.w, res)
		if err == nil && a.code == 1 {
			err = l.raiseSentFloor(ctx, ww.w.DLQ, a.before, a.after, floor, start)
		}
		if err != nil {
			return nil, fail(err, "ledger window of %s", ww.w.ReplayID)
		}
		for id, by := range a.refused {
			refused[id] = by
		}
		switch {
		case a.code == 1:
			l.recorded(ww, pos)
			return refused, nil
		case try >= maxSealTries:
			return nil, fmt.Errorf("store: ledger window of %s: the log moved under %d writes", ww.w.ReplayID, try+1)
		case a.code == 2:
			l.tails.set(ww.w.ReplayID, a.n)
		default: // 3: some refused, nothing written
			ww.drop(a.refused)
			if len(ww.pairs) == 0 {
				return refused, nil
			}
		}
	}
}

// windowRecord writes a window's record in the replay's slot (Redis
// Cluster), again at the log's length when it was not where expected.
func (l *Ledger) windowRecord(ctx context.Context, ww *window, keys []string) error {
	for try := 0; ; try++ {
		pos := l.tails.get(ww.w.ReplayID)
		res, err := l.run(ctx, windowRecordScript, keys, ww.args(l, pos))
		if err != nil {
			return err
		}
		a, err := windowResult(ww.w, res)
		switch {
		case err != nil:
			return err
		case a.code == 1:
			l.recorded(ww, pos)
			return nil
		case try >= maxSealTries:
			return fmt.Errorf("the log moved under %d writes", try+1)
		}
		l.tails.set(ww.w.ReplayID, a.n)
	}
}

// recorded notes a window written at pos.
func (l *Ledger) recorded(ww *window, pos int64) {
	if !ww.w.Resend {
		l.appended(ww.w.ReplayID, pos)
	}
}

// window is a window being written: its entries with their MACs, and
// the parts of the script's ARGV that do not depend on where its record
// goes.
type window struct {
	w     engine.Window
	m     *ledgerMACer // nil without a key
	now   int64
	at    int64
	dlq   string // JSON
	es    []logEntry
	pairs []any // message id, entry JSON
}

// newWindow signs w's entries.
func (l *Ledger) newWindow(w engine.Window) (*window, error) {
	now := l.b.now()
	at := now
	if !w.Entries[0].At.IsZero() {
		at = w.Entries[0].At
	}
	q, err := json.Marshal(w.DLQ)
	if err != nil {
		return nil, err
	}
	ww := &window{w: w, m: l.b.ledgerMACer(), now: now.UnixMilli(), at: at.UnixMilli(), dlq: string(q),
		es: make([]logEntry, 0, len(w.Entries)), pairs: make([]any, 0, 2*len(w.Entries))}
	for _, e := range w.Entries {
		if e.ID == "" {
			return nil, fmt.Errorf("empty message id")
		}
		le := logEntry{ID: e.ID, Target: e.Target, Seq: e.Seq, Copy: e.Copy}
		if ww.m != nil {
			le.MAC = ww.m.entry(w.ReplayID, "i", ww.at, w.DLQ, le)
		}
		rec, err := json.Marshal(le)
		if err != nil {
			return nil, err
		}
		ww.es = append(ww.es, le)
		ww.pairs = append(ww.pairs, e.ID, string(rec))
	}
	return ww, nil
}

// drop leaves out the entries of the refused ids.
func (ww *window) drop(refused map[string]string) {
	if len(refused) == 0 {
		return
	}
	es, pairs := ww.es[:0], ww.pairs[:0]
	for i, le := range ww.es {
		if _, no := refused[le.ID]; !no {
			es = append(es, le)
			pairs = append(pairs, ww.pairs[2*i], ww.pairs[2*i+1])
		}
	}
	ww.es, ww.pairs = es, pairs
}

// args are the window scripts' ARGV (see luaFence) for a record at
// position pos of the log.
func (ww *window) args(l *Ledger, pos int64) []any {
	w := ww.w
	head := `{"k":"i","a":` + strconv.FormatInt(ww.at, 10) + `,"q":` + ww.dlq
	at, tally := "", ""
	if ww.m != nil && !w.Resend {
		at = strconv.FormatInt(pos, 10)
		tally = ww.m.tally(w.ReplayID, pos+1)
		head += `,"s":"` + ww.m.record(w.ReplayID, pos, "i", ww.at, w.DLQ, ww.es) + `"`
	}
	head += `,"e":[`
	resend := "0"
	if w.Resend {
		resend = "1"
	}
	args := make([]any, 0, 11+3*len(ww.pairs)/2)
	args = append(args, w.ReplayID, w.Owner, strconv.FormatInt(w.Epoch, 10), strconv.FormatInt(ww.now, 10),
		strconv.FormatInt(w.Since.UnixMilli(), 10), l.b.cfg.retentionMs(), head, resend, at, tally)
	return l.b.appendMarks(args, w.DLQ, w.ReplayID, ww.now, ww.pairs)
}

// runIndexed is run for a script that writes dlq's sent index, reading
// the index's floor before it (when signed) in the same round trip.
func (l *Ledger) runIndexed(ctx context.Context, s *redis.Script, keys []string, args []any, dlq string) (res []any, floor string, start int64, err error) {
	if len(l.b.cfg.SigningKey) == 0 {
		res, err = l.run(ctx, s, keys, args)
		return res, "", 0, err
	}
	start = l.b.counts.start()
	sp := l.b.pipeline()
	l.flushSentFloors(ctx, sp)
	l.queueZeroSentFloor(ctx, sp, dlq)
	fl := sp.pipe.Get(ctx, l.b.k.sentFloor(dlq))
	cmd := sp.Script(ctx, s, keys, args...)
	if err := sp.Exec(ctx); err != nil {
		return nil, "", 0, err
	}
	res, err = cmd.Slice()
	return res, fl.Val(), start, err
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

// windowAnswer is a window script's answer.
type windowAnswer struct {
	code    int64             // 1 written; 2 nothing written, the log not at the position expected; 3 nothing written, ids refused
	n       int64             // with code 2, the log's length
	before  int64             // the index's field count before the script (-1: not said)
	after   int64             // and after it
	refused map[string]string // refused id → the replay that sent it
}

// windowResult reads a window script's answer, or engine.ErrLeaseLost
// when the fence refused the window.
func windowResult(w engine.Window, res []any) (windowAnswer, error) {
	if len(res) == 0 {
		return windowAnswer{}, fmt.Errorf("empty answer")
	}
	a := windowAnswer{refused: map[string]string{}, before: -1, after: -1}
	a.code, _ = res[0].(int64)
	switch a.code {
	case 1, 3:
	case 2:
		if len(res) > 1 {
			a.n, _ = res[1].(int64)
		}
		return a, nil
	default:
		why := ""
		if len(res) > 1 {
			why, _ = res[1].(string)
		}
		return windowAnswer{}, fmt.Errorf("window of %s for %s (epoch %d): the %s is another's: %w", w.ReplayID, w.Owner, w.Epoch, why, engine.ErrLeaseLost)
	}
	i := 1
	if len(res) >= 3 {
		if h0, ok := res[1].(int64); ok {
			a.before, a.after, i = h0, atoi64(res[2]), 3
		}
	}
	for ; i+1 < len(res); i += 2 {
		id, _ := res[i].(string)
		by, _ := res[i+1].(string)
		a.refused[id] = by
	}
	return a, nil
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
