package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
// Each replay has a log (P{<replay>}:ledger, a list) with one record per
// batch of intents, confirms or abandons, in the order they were written.
// Each DLQ has an index (Psent:<dlq>, a hash) from message id to the latest
// replays that sent it ("<replay>:<unix ms>:<copies>", newest first, at most
// five), updated by one Lua script per confirmed batch, called by SHA. A write is one
// pipelined round trip of a few commands whatever the batch size — the
// ledger must cost per batch, not per message, or it would slow a replay.
// A pipeline is not a transaction: a call that fails midway may have
// recorded part of its batch.
type Ledger struct{ b *base }

// logRec is one ledger log record: a batch of entries of one kind.
type logRec struct {
	Kind    string     `json:"k"` // "i" intent, "c" confirm, "a" abandoned intent
	At      int64      `json:"a"` // unix ms
	DLQ     string     `json:"q"`
	Entries []logEntry `json:"e"`
}

// logEntry is one copy in a log record.
type logEntry struct {
	ID     string `json:"i"`
	Target string `json:"t"`
	Seq    int    `json:"s"`
	Copy   string `json:"c,omitempty"` // the copy's x-dlqbot-copy
}

// indexScript records confirmed sends in a DLQ's index.
//
//	KEYS[1] the DLQ's sent hash
//	ARGV[1] retention in ms (0: none), ARGV[2] replay id, ARGV[3] unix ms,
//	then pairs of message id and copies sent
//
// Each id's value lists the latest replays that sent it, newest first, at
// most five: "<replay>:<ms>:<copies>,…"; a replay sending an id again adds
// to its copies and moves to the front.
var indexScript = redis.NewScript(`
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

// Intend records entries as pending (an intent) before they are published.
func (l *Ledger) Intend(ctx context.Context, entries []engine.LedgerEntry) error {
	if err := l.write(ctx, "i", entries); err != nil {
		return fail(err, "ledger intend")
	}
	return nil
}

// Confirm records entries as confirmed sends. An entry turns its replay's
// oldest matching pending intent (same id, target and seq) into a confirmed
// send; one without an intent is recorded as a confirmed send at the end.
func (l *Ledger) Confirm(ctx context.Context, entries []engine.LedgerEntry) error {
	if err := l.write(ctx, "c", entries); err != nil {
		return fail(err, "ledger confirm")
	}
	return nil
}

// Abandon withdraws pending intents whose copies were certainly not sent
// (never published, bounced as unroutable, nacked): they stop counting as
// "maybe sent".
func (l *Ledger) Abandon(ctx context.Context, entries []engine.LedgerEntry) error {
	if err := l.write(ctx, "a", entries); err != nil {
		return fail(err, "ledger abandon")
	}
	return nil
}

func (l *Ledger) write(ctx context.Context, kind string, entries []engine.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	type group struct {
		rid, dlq string
		at       int64
		recs     []logEntry
		copies   map[string]int
		order    []string
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
			g = &group{rid: e.ReplayID, dlq: e.DLQ, at: at.UnixMilli(), copies: map[string]int{}}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.recs = append(g.recs, logEntry{ID: e.ID, Target: e.Target, Seq: e.Seq, Copy: e.Copy})
		if g.copies[e.ID] == 0 {
			g.order = append(g.order, e.ID)
		}
		g.copies[e.ID]++
	}
	keep := l.b.cfg.retentionMs()
	sp := l.b.pipeline()
	pipe := sp.pipe
	for _, g := range groups {
		rec, err := json.Marshal(logRec{Kind: kind, At: g.at, DLQ: g.dlq, Entries: g.recs})
		if err != nil {
			return err
		}
		key := l.b.k.ledger(g.rid)
		pipe.RPush(ctx, key, rec)
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
		}
		if kind != "c" {
			continue
		}
		args := make([]any, 0, 3+2*len(g.order))
		args = append(args, keep, g.rid, g.at)
		for _, id := range g.order {
			args = append(args, id, g.copies[id])
		}
		sp.Script(ctx, indexScript, []string{l.b.k.sent(g.dlq)}, args...)
	}
	return sp.Exec(ctx)
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
	pipe := l.b.rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for start := 0; start < len(uniq); start += historyChunk {
		cmds = append(cmds, pipe.HMGet(ctx, l.b.k.sent(dlq), uniq[start:min(start+historyChunk, len(uniq))]...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fail(err, "ledger history")
	}
	approvers := map[string]string{} // replay id → approver
	for c, cmd := range cmds {
		for i, v := range cmd.Val() {
			str, ok := v.(string)
			if !ok {
				continue
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

// parseSends reads an index value: "<replay>:<ms>:<copies>,…", newest first.
func parseSends(v string) []engine.Sent {
	var sent []engine.Sent
	for _, part := range strings.Split(v, ",") {
		f := strings.Split(part, ":")
		if len(f) != 3 {
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

// Entries returns everything replayID recorded, in send order: confirmed
// sends, and intents not (yet) confirmed flagged Pending. Abandoned intents
// are left out.
func (l *Ledger) Entries(ctx context.Context, replayID string) ([]engine.LedgerEntry, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return nil, fmt.Errorf("store: ledger entries: %w", err)
	}
	raw, err := l.b.rdb.LRange(ctx, l.b.k.ledger(replayID), 0, -1).Result()
	if err != nil {
		return nil, fail(err, "ledger entries %s", replayID)
	}
	type match struct {
		id, target string
		seq        int
	}
	var out []engine.LedgerEntry
	pending := map[match][]int{} // indexes in out of unconfirmed intents
	for _, r := range raw {
		var rec logRec
		if err := json.Unmarshal([]byte(r), &rec); err != nil {
			return nil, fmt.Errorf("store: ledger entries %s: decode: %w", replayID, err)
		}
		at := time.UnixMilli(rec.At).UTC()
		for _, le := range rec.Entries {
			e := engine.LedgerEntry{ReplayID: replayID, DLQ: rec.DLQ, ID: le.ID, Target: le.Target, Seq: le.Seq, At: at, Copy: le.Copy}
			m := match{le.ID, le.Target, le.Seq}
			switch rec.Kind {
			case "i":
				e.Pending = true
				out = append(out, e)
				pending[m] = append(pending[m], len(out)-1)
			case "a":
				if q := pending[m]; len(q) > 0 {
					out[q[0]].ID = "" // dropped below: that copy was never sent
					pending[m] = q[1:]
				}
			default:
				if q := pending[m]; len(q) > 0 {
					out[q[0]].Pending = false
					out[q[0]].At = at
					if le.Copy != "" {
						out[q[0]].Copy = le.Copy
					}
					pending[m] = q[1:]
					continue
				}
				out = append(out, e)
			}
		}
	}
	return slices.DeleteFunc(out, func(e engine.LedgerEntry) bool { return e.ID == "" }), nil
}
