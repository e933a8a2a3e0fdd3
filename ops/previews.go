package ops

import (
	"sync"
	"time"
)

// PreviewCacheTTL is how long a PreviewCache keeps an entry: a day (the
// life of a preview token) and an hour.
const PreviewCacheTTL = 25 * time.Hour

// PreviewCache keeps, in this process, what a front end made or posted
// for a preview token (the preview itself, where it was posted), for
// PreviewCacheTTL and for at most size tokens (the oldest is dropped
// first). A preview made by another replica is not known here; the
// caller falls back to what the store has.
type PreviewCache[V any] struct {
	mu   sync.Mutex
	size int
	m    map[string]cachedPreview[V]
}

type cachedPreview[V any] struct {
	v  V
	at time.Time
}

// NewPreviewCache returns an empty cache of at most size tokens.
func NewPreviewCache[V any](size int) *PreviewCache[V] {
	return &PreviewCache[V]{size: size, m: map[string]cachedPreview[V]{}}
}

// Put keeps v for token from now, dropping the oldest entry when the
// cache is full.
func (c *PreviewCache[V]) Put(token string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.size {
		var oldest string
		for k, e := range c.m {
			if oldest == "" || e.at.Before(c.m[oldest].at) {
				oldest = k
			}
		}
		delete(c.m, oldest)
	}
	c.m[token] = cachedPreview[V]{v: v, at: time.Now()}
}

// Get returns what is kept for token, unless it is older than
// PreviewCacheTTL.
func (c *PreviewCache[V]) Get(token string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[token]
	if !ok || time.Since(e.at) > PreviewCacheTTL {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Update replaces what is kept for token by f of it (of the zero V when
// nothing is), keeping the entry's age; an entry that was not there is
// kept from now.
func (c *PreviewCache[V]) Update(token string, f func(V) V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[token]
	e.v = f(e.v)
	if e.at.IsZero() {
		e.at = time.Now()
	}
	c.m[token] = e
}
