package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Jobs = (*Jobs)(nil)

// jobsGroup is the consumer group every worker reads the job stream with.
const jobsGroup = "dlqbot"

// jobField is the stream entry field holding the replay id.
const jobField = "replay"

// Jobs hands replays to workers through a Redis stream (Pjobs) and one
// consumer group: each job goes to one worker. A job is only a hand-out: the
// worker takes ownership with a lease and acks the job at once (the
// stream's pending list is not a heartbeat). A job left unacked for
// Config.JobReclaim (its worker died before acking) is handed out again.
type Jobs struct {
	b     *base
	ready atomic.Bool // the consumer group is known to exist
}

// Enqueue adds a job for replayID.
func (j *Jobs) Enqueue(ctx context.Context, replayID string) error {
	if err := checkTag("replay id", replayID); err != nil {
		return fmt.Errorf("store: enqueue replay: %w", err)
	}
	err := j.b.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: j.b.k.jobs(),
		MaxLen: j.b.cfg.JobsMaxLen,
		Approx: true,
		Values: []any{jobField, replayID},
	}).Err()
	if err != nil {
		return fail(err, "enqueue replay %s", replayID)
	}
	return nil
}

// Next hands the next job to consumer (a worker id), waiting up to block
// for one (block ≤ 0: no waiting); replayID is "" (with a nil ack and error)
// when none came. The returned ack
// removes the job; call it once the replay's lease is taken (or the job is
// found moot). Jobs abandoned unacked by another consumer for
// Config.JobReclaim are handed out first.
func (j *Jobs) Next(ctx context.Context, consumer string, block time.Duration) (string, func() error, error) {
	if consumer == "" {
		return "", nil, errors.New("store: next job: empty consumer")
	}
	if err := j.ensureGroup(ctx); err != nil {
		return "", nil, err
	}
	msgs, err := j.reclaim(ctx, consumer)
	if err == nil && len(msgs) == 0 {
		msgs, err = j.read(ctx, consumer, block)
	}
	if err != nil && redis.HasErrorPrefix(err, "NOGROUP") {
		j.ready.Store(false) // the stream was deleted: recreate next time
	}
	if err != nil {
		return "", nil, fail(err, "next job for %s", consumer)
	}
	if len(msgs) == 0 {
		return "", nil, nil
	}
	m := msgs[0]
	rid, _ := m.Values[jobField].(string)
	ack := func() error { return j.ack(context.WithoutCancel(ctx), m.ID) }
	if rid == "" {
		// A malformed entry: drop it rather than hand it out forever.
		if err := ack(); err != nil {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("store: next job for %s: entry %s has no replay id", consumer, m.ID)
	}
	return rid, ack, nil
}

func (j *Jobs) reclaim(ctx context.Context, consumer string) ([]redis.XMessage, error) {
	if j.b.cfg.JobReclaim < 0 {
		return nil, nil
	}
	msgs, _, err := j.b.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   j.b.k.jobs(),
		Group:    jobsGroup,
		Consumer: consumer,
		MinIdle:  j.b.cfg.JobReclaim,
		Start:    "0-0",
		Count:    1,
	}).Result()
	return msgs, err
}

func (j *Jobs) read(ctx context.Context, consumer string, block time.Duration) ([]redis.XMessage, error) {
	if block <= 0 {
		block = -1 // no BLOCK argument
	}
	streams, err := j.b.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    jobsGroup,
		Consumer: consumer,
		Streams:  []string{j.b.k.jobs(), ">"},
		Count:    1,
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(streams) == 0 {
		return nil, err
	}
	return streams[0].Messages, nil
}

// ack acknowledges and deletes entry id.
func (j *Jobs) ack(ctx context.Context, id string) error {
	pipe := j.b.rdb.TxPipeline()
	pipe.XAck(ctx, j.b.k.jobs(), jobsGroup, id)
	pipe.XDel(ctx, j.b.k.jobs(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err, "ack job %s", id)
	}
	return nil
}

// ensureGroup creates the stream and its consumer group once; a group that
// exists already (BUSYGROUP) is fine. The group starts at "0" so that jobs
// enqueued before any worker ran are delivered.
func (j *Jobs) ensureGroup(ctx context.Context) error {
	if j.ready.Load() {
		return nil
	}
	err := j.b.rdb.XGroupCreateMkStream(ctx, j.b.k.jobs(), jobsGroup, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fail(err, "create job group")
	}
	j.ready.Store(true)
	return nil
}

// Pending returns how many jobs wait in the stream, handed out or not.
func (j *Jobs) Pending(ctx context.Context) (int64, error) {
	n, err := j.b.rdb.XLen(ctx, j.b.k.jobs()).Result()
	if err != nil {
		return 0, fail(err, "count jobs")
	}
	return n, nil
}
