package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// DashboardSessions records the dashboard sessions that were signed out,
// until each would have expired, so that every replica refuses their
// cookies. It implements dashboard.Revocations.
type DashboardSessions struct{ b *base }

// DashboardSessions returns the record of signed-out dashboard sessions.
func (s *Store) DashboardSessions() *DashboardSessions { return &DashboardSessions{s.b} }

// Revoke records session id signed out until until (at least a second
// from now).
func (d *DashboardSessions) Revoke(ctx context.Context, id string, until time.Time) error {
	if id == "" {
		return errors.New("store: dashboard session: no id")
	}
	if time.Until(until) < time.Second {
		until = time.Now().Add(time.Second)
	}
	if err := d.b.rdb.SetArgs(ctx, d.b.k.dashboardSignedOut(id), "1", redis.SetArgs{ExpireAt: until}).Err(); err != nil {
		return fail(err, "dashboard session")
	}
	return nil
}

// Revoked reports whether session id was signed out.
func (d *DashboardSessions) Revoked(ctx context.Context, id string) (bool, error) {
	n, err := d.b.rdb.Exists(ctx, d.b.k.dashboardSignedOut(id)).Result()
	if err != nil {
		return false, fail(err, "dashboard session")
	}
	return n > 0, nil
}
