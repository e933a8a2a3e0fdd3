package bot

import (
	"context"
	"sync"
	"time"
)

// methodHolds keeps, per Slack method, the time before which no call of it
// is made. Slack's rate limits are per method and workspace, so a 429's
// Retry-After holds every call of that method — the preview's status edit
// as much as the progress message's — not only the call that met it. The
// zero value holds nothing.
type methodHolds struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// hold makes calls of method wait until t (never shortening a longer hold).
func (h *methodHolds) hold(method string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	if t.After(h.until[method]) {
		h.until[method] = t
	}
}

// wait blocks until method is not held, or ctx ends (its error).
func (h *methodHolds) wait(ctx context.Context, method string) error {
	for {
		h.mu.Lock()
		d := time.Until(h.until[method])
		h.mu.Unlock()
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
