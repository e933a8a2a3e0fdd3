package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestScheduleClaimOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.st.Schedule()
	now := e.clock.Now()
	const due, later = 100, 10
	for i := range due {
		if err := s.Add(e.ctx, fmt.Sprintf("r_%d:5m", i), now.Add(-time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range later {
		if err := s.Add(e.ctx, fmt.Sprintf("r_%d:24h", i), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			for {
				got, err := s.ClaimDue(e.ctx, now, 7)
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, m := range got {
					claimed[m]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claimed) != due {
		t.Errorf("%d members claimed, want %d", len(claimed), due)
	}
	for m, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times", m, n)
		}
	}
	if n, _ := s.Len(e.ctx); n != later {
		t.Errorf("%d left, want %d", n, later)
	}
	when, ok, err := s.due(e.ctx, "r_3:24h")
	if err != nil || !ok || !when.Equal(now.Add(time.Hour)) {
		t.Errorf("due: %v %v %v", when, ok, err)
	}
	got, err := s.ClaimDue(e.ctx, now.Add(2*time.Hour), 3)
	if err != nil || len(got) != 3 {
		t.Errorf("claim later ones: %v %v", got, err)
	}
	if err := s.remove(e.ctx, "r_9:24h"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.due(e.ctx, "r_9:24h"); ok {
		t.Error("removed member still scheduled")
	}
}

// remove unschedules member; removing an unknown member is not an error.
func (s *Schedule) remove(ctx context.Context, member string) error {
	if err := s.b.rdb.ZRem(ctx, s.b.k.schedule(), member).Err(); err != nil {
		return fail(err, "unschedule %s", member)
	}
	return nil
}

// due returns when member is due; ok is false when it is not scheduled.
func (s *Schedule) due(ctx context.Context, member string) (time.Time, bool, error) {
	score, err := s.b.rdb.ZScore(ctx, s.b.k.schedule(), member).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fail(err, "schedule of %s", member)
	}
	return time.UnixMilli(int64(score)).UTC(), true, nil
}
