package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlackRequestFirstSeen: of ten concurrent arrivals of one signed
// request exactly one is first, a later one is not, another signature is,
// and the record expires with its TTL in Redis.
func TestSlackRequestFirstSeen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sr := e.st.SlackRequests()
	var first atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := sr.FirstSeen(e.ctx, "v0=abc", 10*time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				first.Add(1)
			}
		}()
	}
	wg.Wait()
	if first.Load() != 1 {
		t.Fatalf("%d arrivals were first, want 1", first.Load())
	}
	if ok, err := sr.FirstSeen(e.ctx, "v0=abc", 10*time.Minute); ok || err != nil {
		t.Fatalf("a resent request: first %v, %v", ok, err)
	}
	if ok, err := sr.FirstSeen(e.ctx, "v0=def", 10*time.Minute); !ok || err != nil {
		t.Fatalf("another request: first %v, %v", ok, err)
	}
	keys, _ := e.rdb.Keys(e.ctx, e.st.b.cfg.Prefix+"slackreq:*").Result()
	if len(keys) != 2 {
		t.Fatalf("keys %q, want two", keys)
	}
	for _, k := range keys {
		if ttl := e.rdb.PTTL(e.ctx, k).Val(); ttl <= 9*time.Minute || ttl > 10*time.Minute {
			t.Errorf("%s expires in %s, want 10 minutes", k, ttl)
		}
	}
	if _, err := sr.FirstSeen(e.ctx, "", time.Minute); err == nil {
		t.Error("an empty signature was recorded")
	}
}
