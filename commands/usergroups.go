package commands

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// UserGroups tells which Slack user groups a user belongs to. The bot
// implements it with the Slack API; commands never calls Slack itself.
type UserGroups interface {
	// GroupsOf returns the ids (S…) of the user groups user is in.
	GroupsOf(ctx context.Context, user string) ([]string, error)
}

// CachedGroups wraps a UserGroups with a per-user cache: an answer is reused
// for TTL, so a burst of button clicks costs one Slack call. Errors are not
// cached. It is safe for concurrent use.
type CachedGroups struct {
	src UserGroups
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cachedEntry
}

type cachedEntry struct {
	groups  []string
	expires time.Time
}

// maxCachedUsers bounds the cache; past it, expired entries are dropped,
// and if none are, the whole cache.
const maxCachedUsers = 10_000

// NewCachedGroups returns a cache over src. now tells the time (nil means
// time.Now); ttl <= 0 means one minute.
func NewCachedGroups(src UserGroups, ttl time.Duration, now func() time.Time) *CachedGroups {
	if ttl <= 0 {
		ttl = time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &CachedGroups{src: src, ttl: ttl, now: now, entries: map[string]cachedEntry{}}
}

// GroupsOf returns user's groups from the cache while fresh, else from the
// wrapped source.
func (c *CachedGroups) GroupsOf(ctx context.Context, user string) ([]string, error) {
	c.mu.Lock()
	e, ok := c.entries[user]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return slices.Clone(e.groups), nil
	}
	groups, err := c.src.GroupsOf(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("commands: groups of %s: %w", user, err)
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedUsers {
		for u, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, u)
			}
		}
		if len(c.entries) >= maxCachedUsers {
			clear(c.entries)
		}
	}
	c.entries[user] = cachedEntry{groups: slices.Clone(groups), expires: now.Add(c.ttl)}
	return groups, nil
}
