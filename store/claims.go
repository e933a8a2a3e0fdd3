package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.Claims = (*Claims)(nil)

// Claims hands a DLQ's messages to one replay at a time (engine.Claims).
// Each DLQ has one hash (Pclaims:<dlq>) from message id to
// "<replay>|c|<expiry ms>" (claimed for a step) or "<replay>|s|<ms>"
// (sent, or maybe sent). The key is per DLQ, not per replay, so it cannot
// share a replay's hash tag: its scripts touch that one key only, which
// keeps them in one Cluster slot; what a replay's own keys say (its
// ledger) is written apart, and a crash between the two leaves a claim
// that expires by itself.
type Claims struct{ b *base }

// claimScript claims ids for a replay.
//
//	KEYS[1] the DLQ's claims hash
//	ARGV[1] replay id, ARGV[2] now (unix ms), ARGV[3] claim expiry (unix ms),
//	ARGV[4] since (unix ms): sends by others before it do not refuse,
//	ARGV[5] retention in ms (0: none), then the ids
//
// It returns the refused ids, each followed by its current value. An id
// is refused when another replay holds an unexpired claim on it or sent
// it at or after since; every other id is claimed (an own send stays a
// send).
var claimScript = redis.NewScript(`
local key, rid = KEYS[1], ARGV[1]
local now, exp, since = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local refused = {}
for i = 6, #ARGV do
  local id = ARGV[i]
  local cur = redis.call('HGET', key, id)
  local take = true
  if cur then
    local r, st, ms = string.match(cur, '^(.*)|(%a)|(%d+)$')
    ms = tonumber(ms)
    if r == rid then
      if st == 's' then take = false end
    elseif (st == 'c' and ms and ms > now) or (st == 's' and ms and ms >= since) then
      refused[#refused+1] = id
      refused[#refused+1] = cur
      take = false
    end
  end
  if take then redis.call('HSET', key, id, rid .. '|c|' .. exp) end
end
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', key, ARGV[5]) end
return refused
`)

// settleScript ends a replay's step on the DLQ.
//
//	KEYS[1] the DLQ's claims hash
//	ARGV[1] replay id, ARGV[2] now (unix ms), ARGV[3] retention in ms,
//	ARGV[4] how many sent ids follow, then the sent ids, then the released ids
//
// Sent ids become "<replay>|s|<now>"; released ids are deleted while the
// replay's own claim (not a send) is on them.
var settleScript = redis.NewScript(`
local key, rid, now = KEYS[1], ARGV[1], ARGV[2]
local nsent = tonumber(ARGV[4])
for i = 5, 4 + nsent do
  redis.call('HSET', key, ARGV[i], rid .. '|s|' .. now)
end
for i = 5 + nsent, #ARGV do
  local cur = redis.call('HGET', key, ARGV[i])
  if cur and string.sub(cur, 1, #rid + 3) == rid .. '|c|' then
    redis.call('HDEL', key, ARGV[i])
  end
end
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', key, ARGV[3]) end
return 1
`)

// Claim claims ids of dlq for replay until ttl from now; see engine.Claims.
func (c *Claims) Claim(ctx context.Context, dlq, replay string, ids []string, since time.Time, ttl time.Duration) (map[string]engine.Claim, error) {
	if err := checkTag("replay id", replay); err != nil {
		return nil, fmt.Errorf("store: claim: %w", err)
	}
	out := map[string]engine.Claim{}
	if len(ids) == 0 {
		return out, nil
	}
	now := c.b.now()
	args := make([]any, 0, 5+len(ids))
	args = append(args, replay, now.UnixMilli(), now.Add(ttl).UnixMilli(), since.UnixMilli(), c.b.cfg.retentionMs())
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := claimScript.Run(ctx, c.b.rdb, []string{c.b.k.claims(dlq)}, args...).StringSlice()
	if err != nil {
		return nil, fail(err, "claim %d id(s) of %s for %s", len(ids), dlq, replay)
	}
	for i := 0; i+1 < len(res); i += 2 {
		if cl, ok := parseClaim(res[i+1]); ok {
			out[res[i]] = cl
		}
	}
	return out, nil
}

// Settle marks sent ids sent by replay and releases its claims on released.
func (c *Claims) Settle(ctx context.Context, dlq, replay string, sent, released []string) error {
	if len(sent) == 0 && len(released) == 0 {
		return nil
	}
	args := make([]any, 0, 4+len(sent)+len(released))
	args = append(args, replay, c.b.now().UnixMilli(), c.b.cfg.retentionMs(), len(sent))
	for _, id := range sent {
		args = append(args, id)
	}
	for _, id := range released {
		args = append(args, id)
	}
	if err := settleScript.Run(ctx, c.b.rdb, []string{c.b.k.claims(dlq)}, args...).Err(); err != nil {
		return fail(err, "settle claims of %s on %s", replay, dlq)
	}
	return nil
}

// Holders returns who, other than replay, holds which of ids now.
func (c *Claims) Holders(ctx context.Context, dlq, replay string, ids []string) (map[string]engine.Claim, error) {
	out := map[string]engine.Claim{}
	if len(ids) == 0 {
		return out, nil
	}
	vals, err := c.b.rdb.HMGet(ctx, c.b.k.claims(dlq), ids...).Result()
	if err != nil {
		return nil, fail(err, "claim holders on %s", dlq)
	}
	now := c.b.now()
	for i, v := range vals {
		s, _ := v.(string)
		if cl, ok := parseClaim(s); ok && cl.Replay != replay && (cl.Sent || cl.At.After(now)) {
			out[ids[i]] = cl
		}
	}
	return out, nil
}

// Readers lists the replays other than replay with unexpired claims on dlq.
func (c *Claims) Readers(ctx context.Context, dlq, replay string) ([]string, error) {
	vals, err := c.b.rdb.HVals(ctx, c.b.k.claims(dlq)).Result()
	if err != nil {
		return nil, fail(err, "claim readers on %s", dlq)
	}
	now := c.b.now()
	var out []string
	for _, v := range vals {
		if cl, ok := parseClaim(v); ok && !cl.Sent && cl.At.After(now) && cl.Replay != replay && !slices.Contains(out, cl.Replay) {
			out = append(out, cl.Replay)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseClaim reads "<replay>|c|<expiry ms>" or "<replay>|s|<ms>"; a
// claim's At is its expiry, a send's its time.
func parseClaim(v string) (engine.Claim, bool) {
	f := strings.Split(v, "|")
	if len(f) != 3 || f[0] == "" {
		return engine.Claim{}, false
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || (f[1] != "c" && f[1] != "s") {
		return engine.Claim{}, false
	}
	return engine.Claim{Replay: f[0], Sent: f[1] == "s", At: time.UnixMilli(ms).UTC()}, true
}
