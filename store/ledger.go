package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Ledger = (*Ledger)(nil)

// historyChunk is how many ids one HMGET of History asks for.
const historyChunk = 10000

// Ledger records what replays sent and answers "was this replayed?". It
// implements engine.Ledger.
//
// Each replay has a log (P{<replay>}:ledger, a list) with one intent
// record per window of copies, written by one Lua script per window that
// also checks the run's fence and the DLQ's sent index (ledger_window.go),
// and a hash of compact confirm and abandon records (P{<replay>}:acks,
// ledger_acks.go). Each DLQ has an index (Psent:<dlq>, a hash) from message
// id to the latest replays that sent or are sending it
// ("<replay>:<unix ms>:<copies>", newest first, at most five), written with
// the intents. Every write costs per window, not per message, or the
// ledger would slow a replay. The log is read in pages (ledger_pages.go);
// ledgers written by earlier releases (confirm and abandon records in the
// log, the index written at confirm) are still read, whole.
type Ledger struct {
	b      *base
	tails  tails      // where each replay's next record is expected (ledger_seal.go)
	floors sentFloors // sent index floors not yet written (ledger_sent.go)
}

// logRec is one ledger log record: a batch of entries of one kind.
type logRec struct {
	Kind    string     `json:"k"` // "i" intent, "c" confirm, "a" abandoned intent
	At      int64      `json:"a"` // unix ms
	DLQ     string     `json:"q"`
	Seal    string     `json:"s,omitempty"` // its seal when signed (ledger_seal.go)
	Entries []logEntry `json:"e"`
}

// logEntry is one copy in a log record.
type logEntry struct {
	ID     string `json:"i"`
	Target string `json:"t"`
	Seq    int    `json:"s"`
	Copy   string `json:"c,omitempty"` // the copy's x-dlqbot-copy
	MAC    string `json:"m,omitempty"` // its MAC when signed (ledger_sign.go)
}

// Confirm records entries as confirmed sends. An entry with a copy tag
// confirms the intent of that copy, in a compact record (ledger_acks.go);
// one without turns its replay's oldest matching pending intent (same id,
// target and seq) into a confirmed send, or is recorded as a confirmed
// send at the end, as earlier releases did.
func (l *Ledger) Confirm(ctx context.Context, entries []engine.LedgerEntry) error {
	rest, err := l.ack(ctx, 'c', entries)
	if err == nil {
		err = l.write(ctx, "c", rest)
	}
	if err != nil {
		return fail(err, "ledger confirm")
	}
	return nil
}

// Abandon withdraws pending intents whose copies were certainly not sent
// (never published, bounced as unroutable, nacked): they stop counting as
// "maybe sent", in the replay's ledger and in the DLQ's sent index.
func (l *Ledger) Abandon(ctx context.Context, entries []engine.LedgerEntry) error {
	rest, err := l.ack(ctx, 'a', entries)
	if err == nil {
		err = l.unmarkEntries(ctx, entries, rest)
	}
	if err == nil {
		err = l.write(ctx, "a", rest)
	}
	if err != nil {
		return fail(err, "ledger abandon")
	}
	return nil
}

// unmarkEntries withdraws from the DLQs' sent indexes the marks of the
// abandoned entries their windows made (those with a copy tag: not in
// rest).
func (l *Ledger) unmarkEntries(ctx context.Context, entries, rest []engine.LedgerEntry) error {
	if len(rest) == len(entries) {
		return nil
	}
	type key struct{ rid, dlq string }
	n := map[key]map[string]int{}
	order := map[key][]string{}
	var keys []key
	for _, e := range entries {
		if _, _, ok := parseCopy(e.Copy); !ok {
			continue
		}
		k := key{e.ReplayID, e.DLQ}
		if n[k] == nil {
			n[k] = map[string]int{}
			keys = append(keys, k)
		}
		if n[k][e.ID] == 0 {
			order[k] = append(order[k], e.ID)
		}
		n[k][e.ID]++
	}
	for _, k := range keys {
		if err := l.unmarkIDs(ctx, k.rid, k.dlq, order[k], n[k]); err != nil {
			return err
		}
	}
	return nil
}

// write records entries as earlier releases did: one JSON record per
// replay and batch, and for confirms the DLQ's sent index, updated at
// confirm. It is used for entries without a copy tag, and marks the
// ledger's layout "mixed" (read whole).
func (l *Ledger) write(ctx context.Context, kind string, entries []engine.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	type group struct {
		rid, dlq string
		at       int64
		recs     []logEntry
	}
	now := l.b.now()
	var groups []*group
	byKey := map[[3]string]*group{}
	for _, e := range entries {
		if err := checkTag("replay id", e.ReplayID); err != nil {
			return err
		}
		if e.ID == "" {
			return fmt.Errorf("replay %s: empty message id", e.ReplayID)
		}
		at := e.At
		if at.IsZero() {
			at = now
		}
		k := [3]string{e.ReplayID, e.DLQ, strconv.FormatInt(at.UnixMilli(), 10)}
		g := byKey[k]
		if g == nil {
			g = &group{rid: e.ReplayID, dlq: e.DLQ, at: at.UnixMilli()}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.recs = append(g.recs, logEntry{ID: e.ID, Target: e.Target, Seq: e.Seq, Copy: e.Copy})
	}
	keep := l.b.cfg.retentionMs()
	sp := l.b.pipeline()
	// Each replay's first record goes in the pipeline; a record that finds
	// the log elsewhere, and the replay's further records, are written
	// after it, in order (appendRecord).
	type pend struct {
		rid string
		rec logRec
		pos int64
		cmd *redis.Cmd
	}
	var pends []*pend
	first := map[string]bool{}
	// With a key, each index write reads the index's floor first and
	// raises it after (ledger_sent.go).
	type mark struct {
		dlq   string
		floor *redis.StringCmd
		cmd   *redis.Cmd
	}
	var marks []mark
	m := l.b.ledgerMACer()
	start := l.b.counts.start()
	for _, g := range groups {
		l.b.signEntries(g.rid, kind, g.at, g.dlq, g.recs)
		p := &pend{rid: g.rid, rec: logRec{Kind: kind, At: g.at, DLQ: g.dlq, Entries: g.recs}}
		pends = append(pends, p)
		if !first[g.rid] {
			first[g.rid] = true
			p.pos = l.tails.get(g.rid)
			args, err := l.appendArgs(&p.rec, g.rid, p.pos)
			if err != nil {
				return err
			}
			p.cmd = sp.Script(ctx, appendScript, []string{l.b.k.ledger(g.rid), l.b.k.acks(g.rid)}, args...)
		}
		if kind != "c" {
			continue
		}
		// The index, as a resend window marks it: counted, never refused.
		pairs := make([]any, 0, 2*len(g.recs))
		for _, r := range g.recs {
			pairs = append(pairs, r.ID, "")
		}
		args := make([]any, 0, 11+3*len(pairs)/2)
		args = append(args, g.rid, "", "", strconv.FormatInt(g.at, 10), "0", keep, "", "1", "", "")
		args = l.b.appendMarks(args, g.dlq, g.rid, g.at, pairs)
		if m != nil {
			l.queueZeroSentFloor(ctx, sp, g.dlq)
			marks = append(marks, mark{dlq: g.dlq, floor: sp.pipe.Get(ctx, l.b.k.sentFloor(g.dlq))})
			marks[len(marks)-1].cmd = sp.Script(ctx, windowMarkScript, []string{l.b.k.sent(g.dlq)}, args...)
		} else {
			sp.Script(ctx, windowMarkScript, []string{l.b.k.sent(g.dlq)}, args...)
		}
	}
	if err := sp.Exec(ctx); err != nil {
		return err
	}
	for _, mk := range marks {
		res, err := mk.cmd.Slice()
		if err != nil {
			return err
		}
		a, err := windowResult(engine.Window{}, res)
		if err == nil {
			err = l.raiseSentFloor(ctx, mk.dlq, a.before, a.after, mk.floor.Val(), start)
		}
		if err != nil {
			return err
		}
	}
	for _, p := range pends {
		if p.cmd != nil {
			res, err := p.cmd.Slice()
			if err != nil {
				return err
			}
			if len(res) < 2 {
				l.appended(p.rid, p.pos)
				continue
			}
			n, _ := res[1].(int64)
			l.tails.set(p.rid, n)
		}
		if err := l.appendRecord(ctx, p.rec, p.rid); err != nil {
			return err
		}
	}
	return nil
}

// appendScript appends a record written as earlier releases did to a
// replay's log, marking its layout "mixed" first (a page reader never
// meets the record in a ledger still marked as windows only).
//
//	KEYS[1] the replay's ledger, KEYS[2] its acks
//	ARGV[1] the position the record is sealed for ("": unsigned), ARGV[2]
//	the record, ARGV[3] the ledger's tally after it ("": none), ARGV[4]
//	retention in ms (0: none)
//
// It returns {2, length} when the log's length is not ARGV[1] (nothing
// written), else {1}.
var appendScript = redis.NewScript(`
if ARGV[1] ~= '' then
  local n = redis.call('LLEN', KEYS[1])
  if n ~= tonumber(ARGV[1]) then return {2, n} end
end
redis.call('HSET', KEYS[2], 'layout', 'mixed')
redis.call('RPUSH', KEYS[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'tally', ARGV[3]) end
if tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return {1}
`)

// appendRecord appends rec (its entries signed) to rid's log, sealed for
// the position it lands at when signed.
func (l *Ledger) appendRecord(ctx context.Context, rec logRec, rid string) error {
	keys := []string{l.b.k.ledger(rid), l.b.k.acks(rid)}
	for try := 0; ; try++ {
		pos := l.tails.get(rid)
		args, err := l.appendArgs(&rec, rid, pos)
		if err != nil {
			return err
		}
		res, err := l.run(ctx, appendScript, keys, args)
		if err != nil {
			return err
		}
		if len(res) < 2 {
			l.appended(rid, pos)
			return nil
		}
		if try >= maxSealTries {
			return fmt.Errorf("replay %s: the log moved under %d writes", rid, try+1)
		}
		n, _ := res[1].(int64)
		l.tails.set(rid, n)
	}
}

// appendArgs are appendScript's ARGV for rec at position pos of rid's
// log: rec sealed for it when signed.
func (l *Ledger) appendArgs(rec *logRec, rid string, pos int64) ([]any, error) {
	at, tally := "", ""
	if m := l.b.ledgerMACer(); m != nil {
		rec.Seal = m.record(rid, pos, rec.Kind, rec.At, rec.DLQ, rec.Entries)
		at, tally = strconv.FormatInt(pos, 10), m.tally(rid, pos+1)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return []any{at, string(raw), tally, l.b.cfg.retentionMs()}, nil
}

// appended notes a record written at pos of rid's log when signed.
func (l *Ledger) appended(rid string, pos int64) {
	if len(l.b.cfg.SigningKey) == 0 {
		return
	}
	l.tails.set(rid, pos+1)
	l.b.tallies.check(rid, pos+1, l.b.tallies.start())
}

// History returns, per message id of dlq, the replays that sent it (the
// latest five), newest first, with the copies each sent and its approver.
// Ids never replayed are absent from the map. It costs one pipelined round
// trip, plus one for the approvers of the replays found.
func (l *Ledger) History(ctx context.Context, dlq string, ids []string) (map[string][]engine.Sent, error) {
	uniq := make([]string, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok && id != "" {
			seen[id] = struct{}{}
			uniq = append(uniq, id)
		}
	}
	out := map[string][]engine.Sent{}
	if len(uniq) == 0 {
		return out, nil
	}
	start := l.b.counts.start()
	pipe := l.b.rdb.Pipeline()
	floor, count, ttl := l.sentFloorRead(ctx, pipe, dlq)
	var cmds []*redis.SliceCmd
	for start := 0; start < len(uniq); start += historyChunk {
		cmds = append(cmds, pipe.HMGet(ctx, l.b.k.sent(dlq), uniq[start:min(start+historyChunk, len(uniq))]...))
	}
	if err := execPipe(ctx, pipe); err != nil {
		return nil, fail(err, "ledger history")
	}
	var check *sentCheck
	if len(l.b.cfg.SigningKey) > 0 {
		if err := l.verifySentCount(dlq, count.Val(), ttl.Val(), floor.Val(), start); err != nil {
			return nil, err
		}
		check = &sentCheck{b: l.b, dlq: dlq, ms: map[string]*sentMACer{}}
	}
	approvers := map[string]string{} // replay id → approver
	for c, cmd := range cmds {
		for i, v := range cmd.Val() {
			str, ok := v.(string)
			if !ok {
				continue
			}
			if check != nil {
				if err := check.part(uniq[c*historyChunk+i], str); err != nil {
					return nil, err
				}
			}
			sent := parseSends(str)
			if len(sent) == 0 {
				continue
			}
			out[uniq[c*historyChunk+i]] = sent
			for _, s := range sent {
				approvers[s.ReplayID] = ""
			}
		}
	}
	if len(approvers) == 0 {
		return out, nil
	}
	if err := l.approvers(ctx, approvers); err != nil {
		return nil, err
	}
	for _, sent := range out {
		for i := range sent {
			sent[i].Approver = approvers[sent[i].ReplayID]
		}
	}
	return out, nil
}

// parseSends reads an index value: "<replay>:<ms>:<copies>[:<MAC>],…",
// newest first ("-": none).
func parseSends(v string) []engine.Sent {
	var sent []engine.Sent
	for _, part := range strings.Split(v, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 && len(f) != 4 {
			continue
		}
		ms, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		sent = append(sent, engine.Sent{ReplayID: f[0], Count: n, At: time.UnixMilli(ms).UTC()})
	}
	return sent
}

func (l *Ledger) approvers(ctx context.Context, m map[string]string) error {
	pipe := l.b.rdb.Pipeline()
	cmds := make(map[string]*redis.StringCmd, len(m))
	for rid := range m {
		cmds[rid] = pipe.HGet(ctx, l.b.k.replay(rid), fieldData)
	}
	if err := execPipe(ctx, pipe); err != nil {
		return fail(err, "ledger history: approvers")
	}
	for rid, cmd := range cmds {
		var r struct {
			Approver string `json:"approver"`
		}
		if cmd.Err() != nil {
			continue
		}
		// A record whose signature fails names no approver (openReplay
		// reports it through Config.OnBadSignature).
		data, err := l.b.openReplay(rid, []byte(cmd.Val()))
		if err == nil && json.Unmarshal(data, &r) == nil {
			m[rid] = r.Approver
		}
	}
	return nil
}
