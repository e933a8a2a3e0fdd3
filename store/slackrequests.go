package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlackRequests remembers the signed Slack requests dlqbot has accepted,
// for as long as their signature stays valid, so that a request captured
// and sent again (a Resume click replayed after someone paused) is refused
// by every replica. It implements bot.SeenRequests.
type SlackRequests struct{ b *base }

// SlackRequests returns the record of accepted Slack requests.
func (s *Store) SlackRequests() *SlackRequests { return &SlackRequests{s.b} }

// ErrRequestSeen means a signed Slack request was accepted before.
var ErrRequestSeen = errors.New("store: this Slack request was already received")

// FirstSeen records the request named key (what its signature covers:
// the bot passes its timestamp and body hash, so that one request under
// two spellings of its signature is one request), for ttl, and reports
// whether this is its first arrival (SET NX: of any number of concurrent
// arrivals on any replica, exactly one is first). The Redis key holds a
// hash of key.
func (r *SlackRequests) FirstSeen(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	if key == "" {
		return false, errors.New("store: slack request: no request key")
	}
	if ttl < time.Second {
		return false, fmt.Errorf("store: slack request: ttl %s is too short", ttl)
	}
	h := sha256.Sum256([]byte(key))
	err := r.b.rdb.SetArgs(ctx, r.b.k.slackRequest(hex.EncodeToString(h[:16])), "1", redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, fail(err, "slack request")
}
