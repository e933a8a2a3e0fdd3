package store

import (
	"fmt"
	"strconv"
	"strings"
)

// keys names every Redis key the store uses; the layout, with each key's
// type and contents, is documented in doc.go. Keys of one replay share the
// hash tag {<replay>} and keys of one token share {<token>}, so each Lua
// script and MULTI touches one Cluster slot.
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

// acks holds a replay's compact confirm and abandon records and its
// ledger's layout (ledger_acks.go).
func (k keys) acks(id string) string   { return k.p + "{" + id + "}:acks" }
func (k keys) events(id string) string { return k.p + "{" + id + "}:events" }

// slackRefs is where a replay shows in Slack, owned by the Slack front
// end (slackrefs.go).
func (k keys) slackRefs(id string) string { return k.p + "{" + id + "}:slack" }
func (k keys) sent(dlq string) string     { return k.p + "sent:" + dlq }

// sentFloor is the signed floor of a DLQ's sent index's field count
// (ledger_sent.go).
func (k keys) sentFloor(dlq string) string { return k.p + "sentfloor:" + dlq }
func (k keys) claims(dlq string) string    { return k.p + "claims:" + dlq }
func (k keys) replays() string             { return k.p + "replays" }
func (k keys) active() string              { return k.p + "active" }
func (k keys) schedule() string            { return k.p + "schedule" }
func (k keys) workers() string             { return k.p + "workers" }
func (k keys) jobs() string                { return k.p + "jobs" }
func (k keys) audit() string               { return k.p + "audit" }

// auditAnchor is the audit chain's anchor (audit_chain.go): its hash tag
// is the trail's whole key, so that it shares the trail's slot.
func (k keys) auditAnchor() string { return "{" + k.p + "audit}:anchor" }

// auditRate counts one principal's audit entries in one minute.
func (k keys) auditRate(principalHash string, minute int64) string {
	return k.p + "auditrate:" + principalHash + ":" + strconv.FormatInt(minute, 10)
}

// Keys of the taps' record (returns.go).
func (k keys) returns(id string) string     { return k.p + "{" + id + "}:returns" }
func (k keys) returnLog(id string) string   { return k.p + "{" + id + "}:returnlog" }
func (k keys) tapArrived(dlq string) string { return k.p + "tap:" + dlq }

// Their signed floors (returns_floor.go).
func (k keys) returnFloor(id string) string { return k.p + "{" + id + "}:returnfloor" }
func (k keys) tapFloor(dlq string) string   { return k.p + "tapfloor:" + dlq }
func (k keys) taps() string                 { return k.p + "taps" }

// tapGap is a DLQ's record of the windows its tap was missing
// (tapgap.go).
func (k keys) tapGap(dlq string) string { return k.p + "tapgap:" + dlq }

// slackRequest is the key of an accepted signed Slack request
// (slackrequests.go), by a hash of its signature.
func (k keys) slackRequest(sigHash string) string { return k.p + "slackreq:" + sigHash }

// dashboardSignedOut is the key of a signed-out dashboard session
// (sessions.go).
func (k keys) dashboardSignedOut(id string) string { return k.p + "dashout:" + id }

// readMark is the key of a queue's read mark (readmarks.go).
func (k keys) readMark(vhost, queue string) string {
	return k.p + "reads:" + vhost + "/" + queue
}

// readers is a DLQ's hash of the replays reading it now (readers.go).
func (k keys) readers(dlq string) string { return k.p + "readers:" + dlq }

// window is the key of a sliding window (windows.go). It is one key per
// script, so it needs no hash tag.
func (k keys) window(name string) string { return k.p + "window:" + name }

// alert is a DLQ's open watch alert and alertSnooze its snooze
// (alerts.go); they share the hash tag {alert:<dlq>} so that opening an
// alert checks the snooze in one script. alerts indexes the DLQs with an
// alert.
func (k keys) alert(dlq string) string       { return k.p + "{alert:" + dlq + "}:alert" }
func (k keys) alertSnooze(dlq string) string { return k.p + "{alert:" + dlq + "}:snooze" }
func (k keys) alertGroups(dlq string) string { return k.p + "{alert:" + dlq + "}:groups" }
func (k keys) alerts() string                { return k.p + "alerts" }

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
