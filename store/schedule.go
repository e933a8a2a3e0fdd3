package store

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Schedule = (*Schedule)(nil)

// maxClaim bounds one ClaimDue call (the script unpacks the members into one
// ZREM, and Lua's stack is limited).
const maxClaim = 1000

// claimDueScript removes and returns members that are due.
//
//	KEYS[1] the schedule sorted set
//	ARGV[1] now in unix ms, ARGV[2] the most members to claim
//
// It returns the claimed members, earliest due first. Being one script, each
// member is claimed by exactly one caller.
var claimDueScript = redis.NewScript(`
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[2])
if #due > 0 then redis.call('ZREM', KEYS[1], unpack(due)) end
return due
`)

// Schedule holds timed work (follow-up checks, reaper passes) in one sorted
// set (Pschedule) scored by due time in unix ms. Members are deterministic
// names chosen by the caller, such as "r_abc:5m", so that scheduling the same
// work twice keeps one entry, and a poller on any process claims it once.
type Schedule struct{ b *base }

// Add schedules member at due; a member already scheduled moves to due.
func (s *Schedule) Add(ctx context.Context, member string, due time.Time) error {
	if member == "" {
		return errors.New("store: schedule: empty member")
	}
	err := s.b.rdb.ZAdd(ctx, s.b.k.schedule(), redis.Z{Score: float64(due.UnixMilli()), Member: member}).Err()
	if err != nil {
		return fail(err, "schedule %s", member)
	}
	return nil
}

// ClaimDue atomically removes and returns up to n members due at or before
// now (at most 1000 per call), earliest first: with any number of concurrent
// pollers, each member is returned to exactly one of them. A caller that
// fails to do the claimed work should Add it again.
func (s *Schedule) ClaimDue(ctx context.Context, now time.Time, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	n = min(n, maxClaim)
	members, err := claimDueScript.Run(ctx, s.b.rdb, []string{s.b.k.schedule()}, now.UnixMilli(), n).StringSlice()
	if err != nil {
		return nil, fail(err, "claim due work")
	}
	if len(members) == 0 {
		return nil, nil
	}
	return members, nil
}
