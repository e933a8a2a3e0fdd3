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
	pipe := sp.pipe
	for _, g := range groups {
		l.b.signEntries(g.rid, kind, g.at, g.dlq, g.recs)
		rec, err := json.Marshal(logRec{Kind: kind, At: g.at, DLQ: g.dlq, Entries: g.recs})
		if err != nil {
			return err
		}
		key := l.b.k.ledger(g.rid)
		// The layout first: a page reader never meets this record in a
		// ledger still marked as windows only.
		pipe.HSet(ctx, l.b.k.acks(g.rid), fieldLayout, layoutMixed)
		pipe.RPush(ctx, key, rec)
		if keep > 0 {
			pipe.PExpire(ctx, key, time.Duration(keep)*time.Millisecond)
			pipe.PExpire(ctx, l.b.k.acks(g.rid), time.Duration(keep)*time.Millisecond)
		}
		if kind != "c" {
			continue
		}
		// The index, as a resend window marks it: counted, never refused.
		args := make([]any, 0, 8+2*len(g.recs))
		args = append(args, g.rid, "", "", strconv.FormatInt(g.at, 10), "0", keep, "", "1")
		for _, r := range g.recs {
			args = append(args, r.ID, "")
		}
		sp.Script(ctx, windowMarkScript, []string{l.b.k.sent(g.dlq)}, args...)
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
