package engine

import (
	"context"
	"fmt"
	"time"
)

// Enqueue hands replay id to the workers through Deps.Jobs, as the front
// ends do after Approve, trying three times half a second, then a second
// apart, so that a passing Redis error does not leave an approved replay
// that nobody runs. It returns the job queue's last error as it is (the
// store's errors name the operation), or an error at once when the engine
// has no Deps.Jobs.
func (s *Service) Enqueue(ctx context.Context, id string) error {
	if s.d.Jobs == nil {
		return fmt.Errorf("engine: enqueue %s: no job queue: the engine was built without Deps.Jobs", id)
	}
	var err error
	for i := range 3 {
		if err = s.d.Jobs.Enqueue(ctx, id); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-s.d.Clock.After(time.Duration(i+1) * 500 * time.Millisecond):
		}
	}
	return err
}
