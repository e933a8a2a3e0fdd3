package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// Rate is a replay's rate as a program gives it: a JSON number of messages
// per second, or the string "max" (unpaced); a numeric string is accepted
// too.
type Rate string

// UnmarshalJSON accepts a number or a string.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*r = Rate(s)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("rate must be a number of messages per second or \"max\"")
	}
	*r = Rate(strconv.FormatFloat(f, 'f', -1, 64))
	return nil
}

// previewCache keeps, in this process, the previews made here (for a
// day), so that asking a person to approve one can post the whole preview.
type previewCache struct {
	mu sync.Mutex
	m  map[string]cachedPreview
}

type cachedPreview struct {
	p  *engine.Preview
	at time.Time
}

const (
	previewCacheSize = 500
	previewCacheTTL  = 25 * time.Hour
)

func newPreviewCache() *previewCache { return &previewCache{m: map[string]cachedPreview{}} }

func (c *previewCache) put(token string, p *engine.Preview) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= previewCacheSize {
		var oldest string
		for k, v := range c.m {
			if oldest == "" || v.at.Before(c.m[oldest].at) {
				oldest = k
			}
		}
		delete(c.m, oldest)
	}
	c.m[token] = cachedPreview{p: p, at: time.Now()}
}

func (c *previewCache) get(token string) (*engine.Preview, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[token]
	if !ok || time.Since(v.at) > previewCacheTTL {
		return nil, false
	}
	return v.p, true
}
