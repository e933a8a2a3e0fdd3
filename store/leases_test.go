package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

func TestLeases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ls := e.st.Leases()
	epoch, ok, err := ls.Acquire(e.ctx, "r_l", "w1", time.Minute)
	if err != nil || !ok || epoch != 1 {
		t.Fatalf("acquire: %d %v %v", epoch, ok, err)
	}
	for _, owner := range []string{"w2", "w1"} {
		if e2, ok, err := ls.Acquire(e.ctx, "r_l", owner, time.Minute); err != nil || ok || e2 != 0 {
			t.Errorf("second acquire by %s: %d %v %v", owner, e2, ok, err)
		}
	}
	if owner, _ := ls.Owner(e.ctx, "r_l"); owner != "w1" {
		t.Errorf("owner %q", owner)
	}
	if err := ls.Extend(e.ctx, "r_l", "w2", time.Minute); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("extend by non-owner: %v", err)
	}
	if err := ls.Extend(e.ctx, "r_l", "w1", 2*time.Minute); err != nil {
		t.Errorf("extend by owner: %v", err)
	}
	if ttl := e.rdb.PTTL(e.ctx, e.st.b.k.lease("r_l")).Val(); ttl <= time.Minute {
		t.Errorf("extended TTL %s", ttl)
	}
	if err := ls.Release(e.ctx, "r_l", "w2"); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("release by non-owner: %v", err)
	}
	if owner, _ := ls.Owner(e.ctx, "r_l"); owner != "w1" {
		t.Errorf("non-owner release freed the lease: %q", owner)
	}
	if err := ls.Release(e.ctx, "r_l", "w1"); err != nil {
		t.Errorf("release: %v", err)
	}
	epoch2, ok, err := ls.Acquire(e.ctx, "r_l", "w2", time.Minute)
	if err != nil || !ok || epoch2 <= epoch {
		t.Errorf("re-acquire: epoch %d after %d, %v %v", epoch2, epoch, ok, err)
	}
	if got, _ := ls.epoch(e.ctx, "r_l"); got != epoch2 {
		t.Errorf("epoch %d, want %d", got, epoch2)
	}
	if _, _, err := ls.Acquire(e.ctx, "r_l", "w3", 0); err == nil {
		t.Error("zero TTL accepted")
	}
}

func TestLeaseConcurrentAcquire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ls := e.st.Leases()
	const n = 8
	type res struct {
		epoch int64
		ok    bool
		err   error
	}
	results := make(chan res, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			ep, ok, err := ls.Acquire(e.ctx, "r_c", string(rune('a'+i)), time.Minute)
			results <- res{ep, ok, err}
		}()
	}
	close(start)
	winners := 0
	for range n {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.ok {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d winners", winners)
	}
}

// epoch returns replayID's current fencing epoch (0 before the first
// Acquire).
func (l *Leases) epoch(ctx context.Context, replayID string) (int64, error) {
	if err := checkTag("replay id", replayID); err != nil {
		return 0, fmt.Errorf("store: lease epoch of %q: %w", replayID, err)
	}
	epoch, err := l.b.rdb.HGet(ctx, l.b.k.replay(replayID), fieldEpoch).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fail(err, "lease epoch of %s", replayID)
	}
	return epoch, nil
}
