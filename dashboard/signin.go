package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Defaults for the sign-in throttle.
const (
	DefaultSignInFailures = 5
	DefaultSignInWindow   = time.Minute
)

// Revocations records sessions that were signed out, so that their
// cookies are refused afterwards even though they still verify. A store
// shared by the replicas (store.DashboardSessions) makes a sign-out hold
// on every replica; Deps.Revocations.
type Revocations interface {
	// Revoke marks session id signed out until it would have expired.
	Revoke(ctx context.Context, id string, until time.Time) error
	// Revoked reports whether session id was signed out.
	Revoked(ctx context.Context, id string) (bool, error)
}

// memRevocations is Revocations in this process's memory: right for the
// default per-process session key, whose sessions hold on this replica
// only anyway.
type memRevocations struct {
	mu  sync.Mutex
	ids map[string]time.Time
	now func() time.Time
}

func newMemRevocations(now func() time.Time) *memRevocations {
	return &memRevocations{ids: map[string]time.Time{}, now: now}
}

func (m *memRevocations) Revoke(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, u := range m.ids {
		if !u.After(now) {
			delete(m.ids, k)
		}
	}
	m.ids[id] = until
	return nil
}

func (m *memRevocations) Revoked(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.ids[id]
	return ok && until.After(m.now()), nil
}

// sessionID is the name a session is revoked under: a hash of its nonce,
// so the store never holds what the CSRF token derives from.
func sessionID(nonce string) string {
	h := sha256.Sum256([]byte("dlqbot-dashboard-session\x00" + nonce))
	return hex.EncodeToString(h[:16])
}

// throttle counts failed sign-ins per client address within a window: at
// the limit, every sign-in from that address is refused until the oldest
// failure leaves the window. It is this process's (each replica counts
// its own).
type throttle struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	now    func() time.Time
	fails  map[string][]time.Time
}

func newThrottle(limit int, window time.Duration, now func() time.Time) *throttle {
	return &throttle{limit: limit, window: window, now: now, fails: map[string][]time.Time{}}
}

// wait returns how long addr must wait before its next sign-in (0: it may
// sign in now).
func (t *throttle) wait(addr string) time.Duration {
	if t.limit <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.recent(addr)
	if len(fs) < t.limit {
		return 0
	}
	return fs[len(fs)-t.limit].Add(t.window).Sub(t.now())
}

// failed records a failed sign-in from addr.
func (t *throttle) failed(addr string) {
	if t.limit <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.fails) > 10000 { // many addresses: forget those with no recent failure
		for a := range t.fails {
			t.recent(a)
		}
	}
	t.fails[addr] = append(t.recent(addr), t.now())
}

// recent returns addr's failures within the window, forgetting older ones.
func (t *throttle) recent(addr string) []time.Time {
	cut := t.now().Add(-t.window)
	fs := t.fails[addr]
	i := 0
	for i < len(fs) && !fs[i].After(cut) {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(t.fails, addr)
		return nil
	}
	t.fails[addr] = fs
	return fs
}

// clientAddr is the address a sign-in is counted against: the client the
// trusted proxy names last in X-Forwarded-For when the request comes from
// one, else the connection's peer.
func (d *Dashboard) clientAddr(r *http.Request) string {
	if d.trusted(r) {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			parts := strings.Split(xff, ",")
			if a := strings.TrimSpace(parts[len(parts)-1]); a != "" {
				return a
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
