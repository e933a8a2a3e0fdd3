package store

import (
	"fmt"
	"sync"
	"testing"
	"time"
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
	when, ok, err := s.Due(e.ctx, "r_3:24h")
	if err != nil || !ok || !when.Equal(now.Add(time.Hour)) {
		t.Errorf("due: %v %v %v", when, ok, err)
	}
	got, err := s.ClaimDue(e.ctx, now.Add(2*time.Hour), 3)
	if err != nil || len(got) != 3 {
		t.Errorf("claim later ones: %v %v", got, err)
	}
	if err := s.Remove(e.ctx, "r_9:24h"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Due(e.ctx, "r_9:24h"); ok {
		t.Error("removed member still scheduled")
	}
}
