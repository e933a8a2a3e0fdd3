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

// Pipeline sizes: History reads historyChunk message hashes per round trip,
// Entries reads entriesChunk log records per LRANGE.
const (
	historyChunk = 50000
	entriesChunk = 10000
)

// Ledger records what replays sent (§5) and answers "was this replayed?". It
// implements engine.Ledger.
//
// Each replay has a log (P{<replay>}:ledger, a list) of intent and confirm
// records in the order they were written; each message id has a hash
// (Pmsg:<id>) with, per replay, the confirmed copy count and the last send
// time. Writes are pipelines of single-key commands, one round trip per
// call, whatever the batch size. A pipeline is not a transaction: a call
// that fails midway may have recorded part of its batch.
type Ledger struct{ b *base }

// logRec is one ledger log record.
type logRec struct {
	Kind   string `json:"k"` // "i" intent, "c" confirm, "a" abandoned intent
	ID     string `json:"id"`
	Target string `json:"t,omitempty"`
	Seq    int    `json:"s,omitempty"`
	At     int64  `json:"a"` // unix ms
}

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

func (l *Ledger) write(ctx context.Context, kind string, entries []engine.LedgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	now := l.b.now()
	logs := map[string][]any{} // replay id → log records
	type sends struct {
		count int64
		last  int64
	}
	msgs := map[string]map[string]*sends{} // message id → replay id → sends
	var order []string                     // replay ids in first-seen order
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
		rec, err := json.Marshal(logRec{Kind: kind, ID: e.ID, Target: e.Target, Seq: e.Seq, At: at.UnixMilli()})
		if err != nil {
			return err
		}
		if _, ok := logs[e.ReplayID]; !ok {
			order = append(order, e.ReplayID)
		}
		logs[e.ReplayID] = append(logs[e.ReplayID], rec)
		if kind != "c" {
			continue
		}
		byReplay := msgs[e.ID]
		if byReplay == nil {
			byReplay = map[string]*sends{}
			msgs[e.ID] = byReplay
		}
		s := byReplay[e.ReplayID]
		if s == nil {
			s = &sends{}
			byReplay[e.ReplayID] = s
		}
		s.count++
		s.last = max(s.last, at.UnixMilli())
	}
	keep := l.b.cfg.retentionMs()
	pipe := l.b.rdb.Pipeline()
	for _, rid := range order {
		key := l.b.k.ledger(rid)
		pipe.RPush(ctx, key, logs[rid]...)
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
		}
	}
	for id, byReplay := range msgs {
		key := l.b.k.message(id)
		for rid, s := range byReplay {
			pipe.HIncrBy(ctx, key, "c:"+rid, s.count)
			pipe.HSet(ctx, key, "t:"+rid, s.last)
		}
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

// History returns, per message id, the replays that sent it, newest first,
// with the copies each sent and its approver. Ids never replayed are absent
// from the map. It costs one pipelined round trip per 50,000 distinct ids,
// plus one for the approvers of the replays found.
func (l *Ledger) History(ctx context.Context, ids []string) (map[string][]engine.Sent, error) {
	uniq := make([]string, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok && id != "" {
			seen[id] = struct{}{}
			uniq = append(uniq, id)
		}
	}
	out := map[string][]engine.Sent{}
	approvers := map[string]string{} // replay id → approver
	for start := 0; start < len(uniq); start += historyChunk {
		chunk := uniq[start:min(start+historyChunk, len(uniq))]
		pipe := l.b.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(chunk))
		for i, id := range chunk {
			cmds[i] = pipe.HGetAll(ctx, l.b.k.message(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fail(err, "ledger history")
		}
		for i, id := range chunk {
			if sent := parseSends(cmds[i].Val()); len(sent) > 0 {
				out[id] = sent
				for _, s := range sent {
					approvers[s.ReplayID] = ""
				}
			}
		}
	}
	if len(approvers) == 0 {
		return out, nil
	}
	if err := l.approvers(ctx, approvers); err != nil {
		return nil, err
	}
	for id, sent := range out {
		for i := range sent {
			sent[i].Approver = approvers[sent[i].ReplayID]
		}
		out[id] = sent
	}
	return out, nil
}

// parseSends turns a message hash (c:<replay> and t:<replay> fields) into
// Sent records, newest first.
func parseSends(h map[string]string) []engine.Sent {
	var sent []engine.Sent
	for f, v := range h {
		rid, ok := strings.CutPrefix(f, "c:")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(v)
		ms, _ := strconv.ParseInt(h["t:"+rid], 10, 64)
		sent = append(sent, engine.Sent{ReplayID: rid, Count: n, At: time.UnixMilli(ms).UTC()})
	}
	slices.SortFunc(sent, func(a, b engine.Sent) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return strings.Compare(a.ReplayID, b.ReplayID)
	})
	return sent
}

// approvers fills in the approver of each replay in m from its record, in
// one pipelined round trip; replays without a record keep "".
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
		if cmd.Err() == nil && json.Unmarshal([]byte(cmd.Val()), &r) == nil {
			m[rid] = r.Approver
		}
	}
	return nil
}

// Entries returns everything replayID recorded, in send order: confirmed
// sends, and intents never confirmed flagged Pending.
func (l *Ledger) Entries(ctx context.Context, replayID string) ([]engine.LedgerEntry, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return nil, fmt.Errorf("store: ledger entries: %w", err)
	}
	key := l.b.k.ledger(replayID)
	n, err := l.b.rdb.LLen(ctx, key).Result()
	if err != nil {
		return nil, fail(err, "ledger entries %s", replayID)
	}
	if n == 0 {
		return nil, nil
	}
	pipe := l.b.rdb.Pipeline()
	var cmds []*redis.StringSliceCmd
	for start := int64(0); start < n; start += entriesChunk {
		cmds = append(cmds, pipe.LRange(ctx, key, start, start+entriesChunk-1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fail(err, "ledger entries %s", replayID)
	}
	type match struct {
		id, target string
		seq        int
	}
	var out []engine.LedgerEntry
	pending := map[match][]int{} // indexes in out of unconfirmed intents
	for _, cmd := range cmds {
		for _, raw := range cmd.Val() {
			var rec logRec
			if err := json.Unmarshal([]byte(raw), &rec); err != nil {
				return nil, fmt.Errorf("store: ledger entries %s: decode: %w", replayID, err)
			}
			e := engine.LedgerEntry{ReplayID: replayID, ID: rec.ID, Target: rec.Target,
				Seq: rec.Seq, At: time.UnixMilli(rec.At).UTC()}
			m := match{rec.ID, rec.Target, rec.Seq}
			if rec.Kind == "i" {
				e.Pending = true
				out = append(out, e)
				pending[m] = append(pending[m], len(out)-1)
				continue
			}
			if rec.Kind == "a" {
				if q := pending[m]; len(q) > 0 {
					out[q[0]].ID = "" // dropped below: that copy was never sent
					pending[m] = q[1:]
				}
				continue
			}
			if q := pending[m]; len(q) > 0 {
				out[q[0]].Pending = false
				out[q[0]].At = e.At
				pending[m] = q[1:]
				continue
			}
			out = append(out, e)
		}
	}
	return slices.DeleteFunc(out, func(e engine.LedgerEntry) bool { return e.ID == "" }), nil
}

// Abandon withdraws pending intents whose copies were certainly not sent
// (never published, returned unroutable, nacked): they stop counting as
// "maybe sent".
func (l *Ledger) Abandon(ctx context.Context, entries []engine.LedgerEntry) error {
	if err := l.write(ctx, "a", entries); err != nil {
		return fail(err, "ledger abandon")
	}
	return nil
}
