package engine

import (
	"context"
	"time"
)

// EnqueueRetry hands replay id to the workers through jobs, trying three
// times half a second, then a second apart, so that a passing Redis error
// does not leave an approved replay that nobody runs. It returns the last
// error. It is the one wait in the engine not on the Service's Clock: a
// function the front ends call without a Service, whose pauses are short
// back-offs between calls to the store.
func EnqueueRetry(ctx context.Context, jobs Jobs, id string) error {
	var err error
	for i := range 3 {
		if err = jobs.Enqueue(ctx, id); err == nil {
			return nil
		}
		t := time.NewTimer(time.Duration(i+1) * 500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}
