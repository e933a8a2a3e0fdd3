package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlackRefs is where each replay shows in Slack — its channel, its thread
// (the preview's ts) and its progress message — in a record the Slack
// front end owns (P{<replay>}:slack), apart from the engine's fenced
// replay record, so that neither writer can overwrite the other. It
// implements bot.SlackRefs.
//
// Replays recorded before this record existed carried the three values in
// the replay record itself ("channel", "thread_ts", "progress_ts"): Get
// reads them from there when the record is missing, and keeps them in the
// new record (migration on read).
type SlackRefs struct{ b *base }

// SlackRefs returns the Slack front end's record of where replays show.
func (s *Store) SlackRefs() *SlackRefs { return &SlackRefs{s.b} }

// Set records where replay id shows; empty values leave what was recorded
// (two writers, the approval and a re-posted progress message, each add
// what they know). The record lives as long as the replay's.
func (sr *SlackRefs) Set(ctx context.Context, id, channel, thread, progress string) error {
	if err := checkTag("replay id", id); err != nil {
		return fmt.Errorf("store: slack refs: %w", err)
	}
	var fields []any
	for _, f := range [][2]string{{"channel", channel}, {"thread_ts", thread}, {"progress_ts", progress}} {
		if f[1] != "" {
			fields = append(fields, f[0], f[1])
		}
	}
	if len(fields) == 0 {
		return nil
	}
	k := sr.b.k.slackRefs(id)
	pipe := sr.b.rdb.TxPipeline()
	pipe.HSet(ctx, k, fields...)
	if ms := sr.b.cfg.retentionMs(); ms > 0 {
		pipe.PExpire(ctx, k, time.Duration(ms)*time.Millisecond)
	}
	if err := execPipe(ctx, pipe); err != nil {
		return fail(err, "slack refs %s", id)
	}
	return nil
}

// Get returns where replay id shows ("" for what is not recorded).
func (sr *SlackRefs) Get(ctx context.Context, id string) (channel, thread, progress string, err error) {
	if err := checkTag("replay id", id); err != nil {
		return "", "", "", fmt.Errorf("store: slack refs: %w", err)
	}
	m, err := sr.b.rdb.HGetAll(ctx, sr.b.k.slackRefs(id)).Result()
	if err != nil {
		return "", "", "", fail(err, "slack refs %s", id)
	}
	if len(m) > 0 {
		return m["channel"], m["thread_ts"], m["progress_ts"], nil
	}
	return sr.legacy(ctx, id)
}

// legacy reads the values an older replay record carries, and records
// them in the new place.
func (sr *SlackRefs) legacy(ctx context.Context, id string) (channel, thread, progress string, err error) {
	data, err := sr.b.rdb.HGet(ctx, sr.b.k.replay(id), fieldData).Bytes()
	if errors.Is(err, redis.Nil) {
		return "", "", "", nil
	}
	if err != nil {
		return "", "", "", fail(err, "slack refs %s: replay record", id)
	}
	if data, err = sr.b.openReplay(id, data); err != nil {
		return "", "", "", err
	}
	var old struct {
		Channel    string `json:"channel"`
		ThreadTS   string `json:"thread_ts"`
		ProgressTS string `json:"progress_ts"`
	}
	if err := json.Unmarshal(data, &old); err != nil {
		return "", "", "", fmt.Errorf("store: slack refs %s: decode the replay record: %w", id, err)
	}
	if old.Channel != "" {
		if err := sr.Set(ctx, id, old.Channel, old.ThreadTS, old.ProgressTS); err != nil {
			return "", "", "", err
		}
	}
	return old.Channel, old.ThreadTS, old.ProgressTS, nil
}
