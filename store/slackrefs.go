package store

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
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
// new record (migration on read). The record is signed as replay records
// are (signing.go), so that whoever can write Redis cannot make the bot
// post a replay's progress, and its payload-free summaries, into another
// channel.
type SlackRefs struct{ b *base }

// SlackRefs returns the Slack front end's record of where replays show.
func (s *Store) SlackRefs() *SlackRefs { return &SlackRefs{s.b} }

// Set records where replay id shows; empty values leave what was recorded
// (two writers, the approval and a re-posted progress message, each add
// what they know). The record lives as long as the replay's. With a
// signing key the record carries "_sig", the MAC of its three values
// (signing.go): Set reads, checks and merges what is recorded and writes
// the whole record again, so a record changed in Redis is refused rather
// than extended.
func (sr *SlackRefs) Set(ctx context.Context, id, channel, thread, progress string) error {
	if err := checkTag("replay id", id); err != nil {
		return fmt.Errorf("store: slack refs: %w", err)
	}
	if channel == "" && thread == "" && progress == "" {
		return nil
	}
	k := sr.b.k.slackRefs(id)
	var fnErr error
	txf := func(tx *redis.Tx) error {
		m, err := tx.HGetAll(ctx, k).Result()
		if err != nil {
			return err
		}
		rec := [3]string{m["channel"], m["thread_ts"], m["progress_ts"]}
		if len(m) > 0 {
			if fnErr = sr.open(id, m); fnErr != nil {
				return fnErr
			}
		}
		for i, v := range [3]string{channel, thread, progress} {
			if v != "" {
				rec[i] = v
			}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			fields := []any{"channel", rec[0], "thread_ts", rec[1], "progress_ts", rec[2]}
			if len(sr.b.cfg.SigningKey) > 0 {
				fields = append(fields, slackRefsSig, sr.sign(id, rec))
			}
			p.HSet(ctx, k, fields...)
			if ms := sr.b.cfg.retentionMs(); ms > 0 {
				p.PExpire(ctx, k, time.Duration(ms)*time.Millisecond)
			}
			return nil
		})
		return err
	}
	for attempt := 0; attempt < updateAttempts; attempt++ {
		fnErr = nil
		err := sr.b.rdb.Watch(ctx, txf, k)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, redis.TxFailedErr):
			continue
		case fnErr != nil:
			return fnErr
		default:
			return fail(err, "slack refs %s", id)
		}
	}
	return fmt.Errorf("store: slack refs %s: %d attempts lost to concurrent writers", id, updateAttempts)
}

// Get returns where replay id shows ("" for what is not recorded). A
// record that fails its signature check is refused (a *SignatureError,
// reported through Config.OnBadSignature): nothing is posted where it
// points.
func (sr *SlackRefs) Get(ctx context.Context, id string) (channel, thread, progress string, err error) {
	if err := checkTag("replay id", id); err != nil {
		return "", "", "", fmt.Errorf("store: slack refs: %w", err)
	}
	m, err := sr.b.rdb.HGetAll(ctx, sr.b.k.slackRefs(id)).Result()
	if err != nil {
		return "", "", "", fail(err, "slack refs %s", id)
	}
	if len(m) > 0 {
		if err := sr.open(id, m); err != nil {
			return "", "", "", err
		}
		return m["channel"], m["thread_ts"], m["progress_ts"], nil
	}
	return sr.legacy(ctx, id)
}

// slackRefsSig is the field holding a signed record's MAC.
const slackRefsSig = "_sig"

// sign is the MAC of replay id's three values, in hex.
func (sr *SlackRefs) sign(id string, rec [3]string) string {
	return hex.EncodeToString(sr.b.mac("slack refs", id, []byte(rec[0]+"\x00"+rec[1]+"\x00"+rec[2])))
}

// open checks a stored record m of replay id against its signature.
func (sr *SlackRefs) open(id string, m map[string]string) error {
	sig, ok := m[slackRefsSig]
	if !ok {
		return sr.b.unsigned("slack refs", id)
	}
	if len(sr.b.cfg.SigningKey) == 0 {
		return sr.b.refuse("slack refs", id, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	}
	want := sr.sign(id, [3]string{m["channel"], m["thread_ts"], m["progress_ts"]})
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return sr.b.refuse("slack refs", id, "its signature does not match its contents (changed in Redis, or signed with another key)")
	}
	return nil
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
