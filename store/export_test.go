package store

import "context"

// Len returns how many members are scheduled.
func (s *Schedule) Len(ctx context.Context) (int64, error) {
	n, err := s.b.rdb.ZCard(ctx, s.b.k.schedule()).Result()
	if err != nil {
		return 0, fail(err, "schedule length")
	}
	return n, nil
}
