package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestClaimsOneReplayAtATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	since := e.clock.Now()
	refused, err := c.Claim(e.ctx, "orders.dlq", "r_a", []string{"x", "y"}, since, time.Minute)
	if err != nil || len(refused) != 0 {
		t.Fatalf("first claim: %v, refused %v", err, refused)
	}
	// Another replay is refused what r_a claimed, and gets the rest.
	refused, err = c.Claim(e.ctx, "orders.dlq", "r_b", []string{"y", "z"}, since, time.Minute)
	if err != nil || len(refused) != 1 || refused["y"].Replay != "r_a" || refused["y"].Sent {
		t.Fatalf("overlapping claim: %v, refused %+v; want y held by r_a", err, refused)
	}
	if rs, err := c.Readers(e.ctx, "orders.dlq", "r_b"); err != nil || !slices.Equal(rs, []string{"r_a"}) {
		t.Fatalf("readers seen by r_b: %v %v", rs, err)
	}
	// r_a sends x and releases y: y is free, x stays r_a's (sent).
	e.clock.Advance(time.Second)
	if err := c.Settle(e.ctx, "orders.dlq", "r_a", []string{"x"}, []string{"y"}); err != nil {
		t.Fatal(err)
	}
	refused, err = c.Claim(e.ctx, "orders.dlq", "r_b", []string{"x", "y"}, since, time.Minute)
	if err != nil || len(refused) != 1 || !refused["x"].Sent || refused["x"].Replay != "r_a" {
		t.Fatalf("after r_a's step: %v, refused %+v; want x sent by r_a", err, refused)
	}
	// A send before since (the approver saw it as replayed) does not refuse.
	if refused, err = c.Claim(e.ctx, "orders.dlq", "r_c", []string{"x"}, e.clock.Now().Add(time.Second), time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("claim after the send: %v, refused %+v", err, refused)
	}
	// r_c's claim expires; then r_d may claim x.
	e.clock.Advance(2 * time.Minute)
	if refused, err = c.Claim(e.ctx, "orders.dlq", "r_d", []string{"x"}, e.clock.Now(), time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("claim after expiry: %v, refused %+v", err, refused)
	}
	h, err := c.Holders(e.ctx, "orders.dlq", "r_b", []string{"x", "y", "w"})
	if err != nil || h["x"].Replay != "r_d" || h["y"].Replay != "" || len(h) != 1 {
		t.Fatalf("holders: %v %+v", err, h)
	}
	if err := c.Settle(e.ctx, "orders.dlq", "r_a", nil, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Holders(e.ctx, "orders.dlq", "", []string{"x"}); h["x"].Replay != "r_d" {
		t.Fatalf("a release by r_a removed r_d's claim: %+v", h)
	}
}

// TestClaimsConcurrent has many replays claim overlapping ids at once:
// each id is granted to exactly one.
func TestClaimsConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%d", i)
	}
	var mu sync.Mutex
	granted := map[string]int{}
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused, err := c.Claim(e.ctx, "q.dlq", fmt.Sprintf("r_%d", r), ids, e.clock.Now(), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if _, no := refused[id]; !no {
					granted[id]++
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if granted[id] != 1 {
			t.Errorf("%s granted to %d replays", id, granted[id])
		}
	}
}
