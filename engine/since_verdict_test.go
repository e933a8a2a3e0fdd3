package engine

import (
	"testing"
	"time"
)

// TestSinceVerdict: at the one-second resolution of death times, a
// connection opened within the failure's second cannot be told; one the
// API cannot date, or a consumer it does not list yet, keeps a verdict
// from being unchanged; any later connection is a restart.
func TestSinceVerdict(t *testing.T) {
	last := time.Date(2026, 12, 6, 7, 30, 12, 0, time.UTC) // x-death: whole seconds
	at := func(d time.Duration) ConsumerConn { return ConsumerConn{ConnectedAt: last.Add(d)} }
	for _, tc := range []struct {
		name      string
		conns     []ConsumerConn
		consumers int
		want      Since
	}{
		{"all before", []ConsumerConn{at(-time.Hour), at(-time.Millisecond)}, 2, SinceUnchanged},
		{"one after", []ConsumerConn{at(-time.Hour), at(time.Second)}, 2, SinceRestarted},
		{"within the failure's second", []ConsumerConn{at(500 * time.Millisecond)}, 1, SinceUnknown},
		{"at the failure's second", []ConsumerConn{at(0)}, 1, SinceUnknown},
		{"undated", []ConsumerConn{at(-time.Hour), {}}, 2, SinceUnknown},
		{"undated beside a restart", []ConsumerConn{{}, at(2 * time.Second)}, 2, SinceRestarted},
		{"fewer listed than counted", []ConsumerConn{at(-time.Hour)}, 2, SinceUnknown},
		{"none listed", nil, 1, SinceUnknown},
	} {
		if got := SinceVerdict(tc.conns, tc.consumers, last); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
