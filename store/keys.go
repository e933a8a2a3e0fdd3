package store

import (
	"fmt"
	"strings"
)

// Key layout (P is Config.Prefix, default "dlqbot:"):
//
//	P{<token>}:token        string  the frozen preview: JSON, gzip-compressed when large; TTL = token TTL
//	P{<token>}:used         string  id of the replay that consumed the token; same TTL as the token
//	P{<replay>}:replay      hash    data (replay JSON), epoch (fencing epoch of the last Acquire),
//	                                desired_by (who asked for the desired state),
//	                                desired (state an operator asked for; an owner's last write
//	                                sets it to what the run became: paused, stopped)
//	P{<replay>}:lease       string  lease owner: worker id "/" random run token; PX = lease TTL
//	P{<replay>}:ledger      list    the replay's ledger log in send order: intent ("i") and
//	                                confirm ("c") records as compact JSON
//	P{<replay>}:events      stream  the replay's progress events (field "e": event JSON), for the
//	                                HTTP API's event stream; capped, kept as long as the replay
//	                                (key function in events.go)
//	P{<token>}:msg          hash    where the preview was posted (channel, ts), for threading
//	Psent:<dlq>             hash    per DLQ, message id → the latest replays that sent it
//	                                ("<replay>:<unix ms>:<copies>", newest first; see ledger.go)
//	Pactive                 set     ids of replays not in a final state (the reaper's index)
//	Preplays                zset    replay ids scored by creation time (unix ms)
//	Pschedule               zset    timed work: deterministic members scored by due time (unix ms)
//	Pworkers                zset    worker ids scored by announcement expiry (Redis time, unix ms)
//	Pjobs                   stream  replay jobs (field "replay"), consumer group "dlqbot"
//	P{<replay>}:returns     hash    copies of the replay that came back, recorded from the DLQ's tap:
//	                                n (events), base (tap arrivals when recording began), g:<group> and
//	                                r:<x-replay-count> counts, x:<group> an example event (JSON),
//	                                i:<id> the highest x-replay-count seen for that id
//	P{<replay>}:returnlog   list    the first returned events (JSON), for the failures a run lists
//	Ptap:<dlq>              string  how many messages the DLQ's tap has recorded in all
//	Ptaps                   hash    DLQs with a tap → unix ms of the last EnsureTap
//	Preads:<vhost>/<queue>  hash    the queue's read mark: count (highest delivery count the last
//	                                reads left), at (unix ms), reads (reads since the queue was
//	                                last read whole); expires after the retention (readmarks.go)
//
// Keys of one replay share the hash tag {<replay>} and keys of one token share
// {<token>}, so each Lua script and MULTI touches one Cluster slot. The global
// keys are single keys, used by single-key commands and scripts only. The
// per-DLQ hashes are written and read with pipelines of single-key
// commands, which Cluster splits by node.
type keys struct {
	p string
}

func (k keys) token(tok string) string     { return k.p + "{" + tok + "}:token" }
func (k keys) tokenUsed(tok string) string { return k.p + "{" + tok + "}:used" }
func (k keys) tokenMessage(tok string) string {
	return k.p + "{" + tok + "}:msg"
}
func (k keys) replay(id string) string { return k.p + "{" + id + "}:replay" }
func (k keys) lease(id string) string  { return k.p + "{" + id + "}:lease" }
func (k keys) ledger(id string) string { return k.p + "{" + id + "}:ledger" }
func (k keys) sent(dlq string) string  { return k.p + "sent:" + dlq }
func (k keys) replays() string         { return k.p + "replays" }
func (k keys) active() string          { return k.p + "active" }
func (k keys) schedule() string        { return k.p + "schedule" }
func (k keys) workers() string         { return k.p + "workers" }
func (k keys) jobs() string            { return k.p + "jobs" }

// Keys of the taps' record (store/returns.go).
func (k keys) returns(id string) string     { return k.p + "{" + id + "}:returns" }
func (k keys) returnLog(id string) string   { return k.p + "{" + id + "}:returnlog" }
func (k keys) tapArrived(dlq string) string { return k.p + "tap:" + dlq }
func (k keys) taps() string                 { return k.p + "taps" }

// maxIDLen bounds replay ids and tokens used inside hash tags.
const maxIDLen = 200

// checkTag reports whether s can be used inside a hash tag: non-empty, not
// too long, without braces (which would move the tag) or whitespace.
func checkTag(kind, s string) error {
	if s == "" || len(s) > maxIDLen || strings.ContainsAny(s, "{} \t\r\n") {
		return fmt.Errorf("invalid %s %q", kind, s)
	}
	return nil
}
