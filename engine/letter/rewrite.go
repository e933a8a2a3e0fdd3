package letter

import (
	"math"
	"reflect"
	"strings"
)

// Headers a replay sets on every copy it sends; consumers and dlqbot itself
// read them by these exact names.
const (
	// HeaderReplayID is the id of the replay that sent the copy (a string).
	HeaderReplayID = "x-replay-id"
	// HeaderReplayCount is how many times the message was replayed (an
	// AMQP integer, written as int32).
	HeaderReplayCount = "x-replay-count"
	// HeaderReplayedFrom is the message's original source queue, where it
	// failed (a string).
	HeaderReplayedFrom = "stroma.dlq.replayed_from"
)

// deathHeaderNames and deathHeaderPrefixes are the headers a replay removes.
var (
	deathHeaderNames    = []string{"x-death", "x-delivery-count", "x-acquired-count"}
	deathHeaderPrefixes = []string{"x-first-death-", "x-last-death-"}
	// routingHeaderNames are the sender-selected distribution headers: the
	// broker routes a copy to the queues they name as well, so a replay
	// removes them (a copy goes to its target only).
	routingHeaderNames = []string{"CC", "BCC"}
)

// IsDeathHeader reports whether name is a header the broker writes when it
// dead-letters a message, which ReplayHeaders removes: the exact names
// x-death, x-delivery-count and x-acquired-count, and every header starting
// with x-first-death- or x-last-death-. Names are matched case-sensitively,
// as AMQP does. ReplayHeaders also removes the routing headers CC and BCC
// (IsRemovedHeader) and resets rascal's retry state (inside the rascal
// table).
func IsDeathHeader(name string) bool {
	for _, n := range deathHeaderNames {
		if name == n {
			return true
		}
	}
	for _, p := range deathHeaderPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// IsRemovedHeader reports whether ReplayHeaders drops the top-level header
// name from a copy: a death header, or CC / BCC.
func IsRemovedHeader(name string) bool {
	for _, n := range routingHeaderNames {
		if name == n {
			return true
		}
	}
	return IsDeathHeader(name)
}

// ReplayHeaders returns the headers of a replayed copy: a new map holding h
// without the death headers (IsDeathHeader) and without CC and BCC (the
// broker would deliver the copy to the queues they name too), with
// x-replay-id set to replayID, x-replay-count set to the previous count
// plus one (an int32; any integer type or numeric string is read, an
// absent, negative or unreadable count counts as 0, and the count stops at
// math.MaxInt32) and stroma.dlq.replayed_from set to source, the queue the
// message failed in. When source is "" (it cannot be derived) an earlier
// replay's stroma.dlq.replayed_from is kept, else none is set.
//
// A framework's retry state for the message's queue is reset like the
// broker's death headers: rascal's rascal.recovery.<originalQueue> and
// rascal.error are removed from the copy's rascal table (its other entries
// are kept), so rascal treats the copy as a first delivery.
//
// reset names further top-level headers to remove: the in-house dialect's
// retry state (HeaderDialect.ResetHeaders), so that framework too treats
// the copy as a first delivery.
//
// Every other header keeps its exact Go value. h is not modified; nested
// tables and arrays are shared with it, not copied (except the rascal table
// when it changes), and must not be changed by the caller while the copy is
// in use.
func ReplayHeaders(h map[string]any, replayID, source string, reset ...string) map[string]any {
	out := make(map[string]any, len(h)+3)
	for k, v := range h {
		if !IsRemovedHeader(k) {
			out[k] = v
		}
	}
	for _, k := range reset {
		delete(out, k)
	}
	if v, ok := h[hRascal]; ok {
		out[hRascal] = resetRascal(v)
	}
	var prev int64
	if v, ok := h[HeaderReplayCount]; ok {
		if n, ok := hdrInt64(v); ok && n > 0 {
			prev = n
		}
	}
	out[HeaderReplayID] = replayID
	out[HeaderReplayCount] = int32(min(prev, math.MaxInt32-1) + 1)
	if source != "" {
		out[HeaderReplayedFrom] = source
	}
	return out
}

// resetRascal returns rascal's header table without its error and without
// the recovery state of its originalQueue. A value that is not a table, or
// that has neither, is returned as it is. The copy keeps the original's map
// type (amqp.Table when read by amqp091-go, which encodes only that).
func resetRascal(v any) any {
	t, ok := asTable(v)
	if !ok || !isAnyTable(v) {
		return v
	}
	_, hasErr := t.get(hRascalError)
	q, _, qok := hdrString(mustGet(t, hRascalOriginalQueue), maxNameLen+1)
	rec, recOK := asTable(mustGet(t, hRascalRecovery))
	var dropRecovery bool
	if qok && recOK && isAnyTable(mustGet(t, hRascalRecovery)) {
		_, dropRecovery = rec.get(q)
	}
	if !hasErr && !dropRecovery {
		return v
	}
	drop := map[string]bool{hRascalError: true}
	out := copyTableWithout(v, drop)
	if dropRecovery {
		newRec := copyTableWithout(mustGet(t, hRascalRecovery), map[string]bool{q: true})
		setTable(out, hRascalRecovery, newRec)
	}
	return out
}

// isAnyTable reports whether v is a map with string keys and interface
// values (map[string]any or a named type like amqp.Table): one that
// copyTableWithout and setTable can rebuild.
func isAnyTable(v any) bool {
	if _, ok := v.(map[string]any); ok {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String &&
		rv.Type().Elem().Kind() == reflect.Interface && !rv.IsNil()
}

// mustGet returns t's value for key, or nil.
func mustGet(t hdrTable, key string) any {
	v, _ := t.get(key)
	return v
}

// copyTableWithout returns a shallow copy of the table v (a map with string
// keys, of v's own type) without the keys in drop.
func copyTableWithout(v any, drop map[string]bool) any {
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			if !drop[k] {
				out[k] = x
			}
		}
		return out
	}
	rv := reflect.ValueOf(v)
	out := reflect.MakeMapWithSize(rv.Type(), rv.Len())
	iter := rv.MapRange()
	for iter.Next() {
		if !drop[iter.Key().String()] {
			out.SetMapIndex(iter.Key(), iter.Value())
		}
	}
	return out.Interface()
}

// setTable stores x under key in the table t (as made by copyTableWithout).
func setTable(t any, key string, x any) {
	if m, ok := t.(map[string]any); ok {
		m[key] = x
		return
	}
	rv := reflect.ValueOf(t)
	rv.SetMapIndex(reflect.ValueOf(key).Convert(rv.Type().Key()), reflect.ValueOf(x))
}
