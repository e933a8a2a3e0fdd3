package commands

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

type fakeGroups struct {
	mu    sync.Mutex
	calls int
	fail  bool
	by    map[string][]string
}

func (f *fakeGroups) GroupsOf(_ context.Context, user string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail {
		return nil, errors.New("slack down")
	}
	return f.by[user], nil
}

func TestCachedGroups(t *testing.T) {
	src := &fakeGroups{by: map[string][]string{"U1": {"S1", "S2"}}}
	clock := time.Unix(1_700_000_000, 0)
	c := NewCachedGroups(src, time.Minute, func() time.Time { return clock })
	ctx := context.Background()

	for range 3 {
		g, err := c.GroupsOf(ctx, "U1")
		if err != nil || !reflect.DeepEqual(g, []string{"S1", "S2"}) {
			t.Fatalf("GroupsOf = %v, %v", g, err)
		}
	}
	if src.calls != 1 {
		t.Fatalf("calls = %d within the TTL, want 1", src.calls)
	}
	// A caller changing the returned slice does not change the cache.
	g, _ := c.GroupsOf(ctx, "U1")
	g[0] = "SX"
	if g, _ := c.GroupsOf(ctx, "U1"); g[0] != "S1" {
		t.Fatal("cache shares its slice")
	}

	clock = clock.Add(time.Minute)
	if _, err := c.GroupsOf(ctx, "U1"); err != nil || src.calls != 2 {
		t.Fatalf("after the TTL: calls = %d, err %v", src.calls, err)
	}

	// Errors are returned wrapped and not cached.
	src.fail = true
	clock = clock.Add(2 * time.Minute)
	if _, err := c.GroupsOf(ctx, "U1"); err == nil || err.Error() != "commands: groups of U1: slack down" {
		t.Fatalf("err = %v", err)
	}
	src.fail = false
	if _, err := c.GroupsOf(ctx, "U1"); err != nil || src.calls != 4 {
		t.Fatalf("after an error: calls = %d, err %v", src.calls, err)
	}

	c.forget("U1")
	if _, _ = c.GroupsOf(ctx, "U1"); src.calls != 5 {
		t.Fatalf("after Forget: calls = %d", src.calls)
	}
	c.forget("")
	if _, _ = c.GroupsOf(ctx, "U1"); src.calls != 6 {
		t.Fatalf("after Forget(all): calls = %d", src.calls)
	}
}

func TestCachedGroupsConcurrent(t *testing.T) {
	src := &fakeGroups{by: map[string][]string{"U1": {"S1"}}}
	c := NewCachedGroups(src, 0, nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%10 == 0 {
				c.forget("")
			}
			if _, err := c.GroupsOf(context.Background(), "U1"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// forget drops user's cached groups (or everyone's when user is "").
func (c *CachedGroups) forget(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if user == "" {
		clear(c.entries)
		return
	}
	delete(c.entries, user)
}
