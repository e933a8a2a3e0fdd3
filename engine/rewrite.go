package engine

import (
	"math"
	"strings"
)

// Headers a replay sets on every copy it sends (§5, §10).
const (
	// HeaderReplayID is the id of the replay that sent the copy (a string).
	HeaderReplayID = "x-replay-id"
	// HeaderReplayCount is how many times the message was replayed (an
	// AMQP integer, written as int32).
	HeaderReplayCount = "x-replay-count"
	// HeaderReplayedFrom is the queue the copy was replayed from (a string).
	HeaderReplayedFrom = "stroma.dlq.replayed_from"
)

// deathHeaderNames and deathHeaderPrefixes are the headers a replay removes.
var (
	deathHeaderNames    = []string{"x-death", "x-delivery-count", "x-acquired-count"}
	deathHeaderPrefixes = []string{"x-first-death-", "x-last-death-"}
)

// DeathHeaders lists the headers ReplayHeaders removes (§5): the exact
// names x-death, x-delivery-count and x-acquired-count, and every header
// starting with x-first-death- or x-last-death- (written with a trailing
// "*"). Names are matched case-sensitively, as AMQP does. The result is a
// fresh slice the caller may keep.
func DeathHeaders() []string {
	out := append([]string(nil), deathHeaderNames...)
	for _, p := range deathHeaderPrefixes {
		out = append(out, p+"*")
	}
	return out
}

// IsDeathHeader reports whether ReplayHeaders removes the header name.
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

// ReplayHeaders returns the headers of a replayed copy: a new map holding h
// without the death headers (DeathHeaders), with x-replay-id set to replayID,
// x-replay-count set to the previous count plus one (an int32; any integer
// type or numeric string is read, an absent, negative or unreadable count
// counts as 0, and the count stops at math.MaxInt32) and
// stroma.dlq.replayed_from set to replayedFrom.
//
// Every other header keeps its exact Go value. h is not modified; nested
// tables and arrays are shared with it, not copied, and must not be changed
// by the caller while the copy is in use.
func ReplayHeaders(h map[string]any, replayID, replayedFrom string) map[string]any {
	out := make(map[string]any, len(h)+3)
	for k, v := range h {
		if !IsDeathHeader(k) {
			out[k] = v
		}
	}
	var prev int64
	if v, ok := h[HeaderReplayCount]; ok {
		if n, ok := hdrInt64(v); ok && n > 0 {
			prev = n
		}
	}
	out[HeaderReplayID] = replayID
	out[HeaderReplayCount] = int32(min(prev, math.MaxInt32-1) + 1)
	out[HeaderReplayedFrom] = replayedFrom
	return out
}
