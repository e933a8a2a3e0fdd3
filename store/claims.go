package store

import (
	"context"
	"errors"
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
// "<replay>|c|<expiry ms>" (claimed for a step), "<replay>|s|<ms>"
// (sent, or maybe sent), "<replay>|o|<ms>" (owned since its approval at
// ms: its to send) or "<replay>|t|<ms>" (owned by a take-over at ms);
// what a replay took over stays marked so through its claim and send:
// "k" is a claim and "x" a send of an id taken over. The key is per DLQ, not per replay, so it cannot
// share a replay's hash tag: its scripts touch that one key only, which
// keeps them in one Cluster slot; what a replay's own keys say (its
// ledger) is written apart, and a crash between the two leaves a claim
// that expires by itself.
type Claims struct{ b *base }

// whoField is the field of a DLQ's claims hash that sums it up per
// replay (Claims.Summary): "<replay>=<last write ms>=<latest claim expiry
// ms>;" for each replay that wrote there within the retention. It starts
// with a NUL byte, which no message id the engine keys by does.
const whoField = "\x00who"

// noteLua is the scripts' shared function note(key, rid, now, exp, keep),
// which keeps whoField up to date: every script below calls it once.
const noteLua = `
-- note: the DLQ's summary (field "\0who", see whoField): per replay
-- "<replay>=<last write ms>=<latest claim expiry ms>;", entries older
-- than the retention (ARGV retention, 0: none) dropped.
local function note(key, rid, now, exp, keep)
  local who = redis.call('HGET', key, '\0who') or ''
  local out, seen = {}, false
  now, exp, keep = tonumber(now), tonumber(exp), tonumber(keep)
  for r, w, e in string.gmatch(who, '([^=;]+)=(%d+)=(%d+);') do
    w, e = tonumber(w), tonumber(e)
    if r == rid then
      w, seen = now, true
      if exp > e then e = exp end
    end
    if r == rid or keep <= 0 or math.max(w, e) + keep > now then
      out[#out+1] = r .. '=' .. string.format('%d', w) .. '=' .. string.format('%d', e) .. ';'
    end
  end
  if not seen then out[#out+1] = rid .. '=' .. string.format('%d', now) .. '=' .. string.format('%d', exp) .. ';' end
  redis.call('HSET', key, '\0who', table.concat(out))
end
`

// claimScript claims ids for a replay.
//
//	KEYS[1] the DLQ's claims hash
//	ARGV[1] replay id, ARGV[2] now (unix ms), ARGV[3] claim expiry (unix ms),
//	ARGV[4] since (unix ms): sends by others before it do not refuse,
//	ARGV[5] retention in ms (0: none), then the ids
//
// It returns the refused ids, each followed by its current value. An id
// is refused when another replay holds an unexpired claim on it, owns it
// (o, t: its approval owned it first, or it took it over), or sent it at
// or after since; every other id is claimed (an own send stays a send).
var claimScript = redis.NewScript(noteLua + `
local key, rid = KEYS[1], ARGV[1]
local now, exp, since = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local refused = {}
for i = 6, #ARGV do
  local id = ARGV[i]
  local cur = redis.call('HGET', key, id)
  local take, mark = true, 'c'
  if cur then
    local r, st, ms = string.match(cur, '^(.*)|(%a)|(%d+)$')
    ms = tonumber(ms)
    if r == rid then
      if st == 's' or st == 'x' then take = false end
      if st == 't' or st == 'k' then mark = 'k' end
    elseif ((st == 'c' or st == 'k') and ms and ms > now) or ((st == 's' or st == 'x') and ms and ms >= since) or st == 'o' or st == 't' then
      refused[#refused+1] = id
      refused[#refused+1] = cur
      take = false
    end
  end
  if take then redis.call('HSET', key, id, rid .. '|' .. mark .. '|' .. exp) end
end
note(key, rid, ARGV[2], exp, ARGV[5])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', key, ARGV[5]) end
return refused
`)

// ownScript makes a replay, at its approval, the owner of the ids no
// other replay owns.
//
//	KEYS[1] the DLQ's claims hash
//	ARGV[1] replay id, ARGV[2] now (unix ms), ARGV[3] since (unix ms):
//	sends by others before it do not refuse, ARGV[4] "1" to take over
//	what other replays own, ARGV[5] retention in ms (0: none), ARGV[6] how
//	many replay ids follow whose ownership lapsed (they ended), then those
//	replay ids, then the ids
//
// It returns triples: id, its value before, and "r" (refused: another
// replay is sending it now, sent it at or after since, or owns it and
// there is no take-over) or "t" (taken over from the replay that owned
// it, with the take-over or because its ownership lapsed; the id is now
// "<replay>|t|<now>", so the replay it was taken from says so). Every
// other id becomes "<replay>|o|<now>" (an own claim or send stays).
var ownScript = redis.NewScript(noteLua + `
local key, rid = KEYS[1], ARGV[1]
local now, since, takeover = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local nlapsed = tonumber(ARGV[6])
local lapsed = {}
for i = 7, 6 + nlapsed do lapsed[ARGV[i]] = true end
local out = {}
for i = 7 + nlapsed, #ARGV do
  local id = ARGV[i]
  local cur = redis.call('HGET', key, id)
  local set = 'o'
  if cur then
    local r, st, ms = string.match(cur, '^(.*)|(%a)|(%d+)$')
    ms = tonumber(ms)
    if r == rid then
      set = nil
    elseif ((st == 'c' or st == 'k') and ms and ms > now) or ((st == 's' or st == 'x') and ms and ms >= since) then
      set = nil
      out[#out+1] = id; out[#out+1] = cur; out[#out+1] = 'r'
    elseif (st == 'o' or st == 't') and lapsed[r] then
      set = 't'
      out[#out+1] = id; out[#out+1] = cur; out[#out+1] = 't'
    elseif st ~= 's' and st ~= 'x' and not lapsed[r] then
      if takeover then
        set = 't'
        out[#out+1] = id; out[#out+1] = cur; out[#out+1] = 't'
      else
        set = nil
        out[#out+1] = id; out[#out+1] = cur; out[#out+1] = 'r'
      end
    end
  end
  if set then redis.call('HSET', key, id, rid .. '|' .. set .. '|' .. ARGV[2]) end
end
note(key, rid, ARGV[2], ARGV[2], ARGV[5])
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', key, ARGV[5]) end
return out
`)

// settleScript ends a replay's step on the DLQ.
//
//	KEYS[1] the DLQ's claims hash
//	ARGV[1] replay id, ARGV[2] now (unix ms), ARGV[3] retention in ms,
//	ARGV[4] how many sent ids follow, then the sent ids, then the released ids
//
// Sent ids become "<replay>|s|<now>" ("x" for a claim "k" of an id taken
// over); released ids on which the replay's own claim (not a send) is go
// back to being owned by it ("<replay>|o|<now>", or "t": still its to
// send).
var settleScript = redis.NewScript(noteLua + `
local key, rid, now = KEYS[1], ARGV[1], ARGV[2]
local nsent = tonumber(ARGV[4])
for i = 5, 4 + nsent do
  local cur = redis.call('HGET', key, ARGV[i])
  local st = 's'
  if cur and string.sub(cur, 1, #rid + 3) == rid .. '|k|' then st = 'x' end
  redis.call('HSET', key, ARGV[i], rid .. '|' .. st .. '|' .. now)
end
for i = 5 + nsent, #ARGV do
  local cur = redis.call('HGET', key, ARGV[i])
  if cur and string.sub(cur, 1, #rid + 3) == rid .. '|c|' then
    redis.call('HSET', key, ARGV[i], rid .. '|o|' .. now)
  elseif cur and string.sub(cur, 1, #rid + 3) == rid .. '|k|' then
    redis.call('HSET', key, ARGV[i], rid .. '|t|' .. now)
  end
end
note(key, rid, now, now, ARGV[3])
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

// Own makes replay the owner of those of ids no other replay owns; see
// engine.Claims. It goes in batches of ownBatch ids, each atomic.
func (c *Claims) Own(ctx context.Context, dlq, replay string, ids []string, since time.Time, takeOver bool, lapsed []string) (refused, taken map[string]engine.Claim, err error) {
	if err := checkTag("replay id", replay); err != nil {
		return nil, nil, fmt.Errorf("store: own: %w", err)
	}
	refused, taken = map[string]engine.Claim{}, map[string]engine.Claim{}
	tk := "0"
	if takeOver {
		tk = "1"
	}
	now := c.b.now()
	for start := 0; start < len(ids); start += ownBatch {
		batch := ids[start:min(len(ids), start+ownBatch)]
		args := make([]any, 0, 6+len(lapsed)+len(batch))
		args = append(args, replay, now.UnixMilli(), since.UnixMilli(), tk, c.b.cfg.retentionMs(), len(lapsed))
		for _, r := range lapsed {
			args = append(args, r)
		}
		for _, id := range batch {
			args = append(args, id)
		}
		res, err := ownScript.Run(ctx, c.b.rdb, []string{c.b.k.claims(dlq)}, args...).StringSlice()
		if err != nil {
			return nil, nil, fail(err, "own %d id(s) of %s for %s", len(batch), dlq, replay)
		}
		for i := 0; i+2 < len(res); i += 3 {
			cl, ok := parseClaim(res[i+1])
			if !ok {
				continue
			}
			if res[i+2] == "t" {
				taken[res[i]] = cl
			} else {
				refused[res[i]] = cl
			}
		}
	}
	return refused, taken, nil
}

// ownBatch bounds the ids one ownership script handles, so that a large
// preview does not hold Redis in one long script.
const ownBatch = 5000

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
		if cl, ok := parseClaim(s); ok && cl.Replay != replay && (cl.Sent || cl.Owned || cl.At.After(now)) {
			out[ids[i]] = cl
		}
	}
	return out, nil
}

// Summary sums up dlq's claims per replay (engine.Claims). A hash written
// before the summary existed has entries but no summary: not known.
func (c *Claims) Summary(ctx context.Context, dlq string) ([]engine.ClaimsBy, bool, error) {
	key := c.b.k.claims(dlq)
	pipe := c.b.rdb.Pipeline()
	who := pipe.HGet(ctx, key, whoField)
	n := pipe.HLen(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fail(err, "claims summary of %s", dlq)
	}
	v, err := who.Result()
	if errors.Is(err, redis.Nil) {
		return nil, n.Val() == 0, nil
	}
	if err != nil {
		return nil, false, fail(err, "claims summary of %s", dlq)
	}
	var out []engine.ClaimsBy
	for _, e := range strings.Split(v, ";") {
		f := strings.Split(e, "=")
		if len(f) != 3 {
			continue
		}
		w, err1 := strconv.ParseInt(f[1], 10, 64)
		x, err2 := strconv.ParseInt(f[2], 10, 64)
		if f[0] == "" || err1 != nil || err2 != nil {
			return nil, false, nil
		}
		out = append(out, engine.ClaimsBy{Replay: f[0], LastWrite: time.UnixMilli(w).UTC(), ClaimsUntil: time.UnixMilli(x).UTC()})
	}
	return out, true, nil
}

// readersPage is how many fields of a DLQ's claims hash Readers asks for
// at a time (HSCAN's COUNT): the hash holds a field per message of every
// live replay of the DLQ, 1,000,000 of them after an incident, and one
// HVALS of that was a 37 MB reply.
const readersPage = 10000

// Readers lists the replays other than replay with unexpired claims on
// dlq or an unexpired reading mark (readers.go). It walks the claims hash
// a page at a time, so its memory is a page's, not the hash's.
func (c *Claims) Readers(ctx context.Context, dlq, replay string) ([]string, error) {
	out, err := c.marked(ctx, dlq, replay, "")
	if err != nil {
		return nil, err
	}
	now := c.b.now()
	var cursor uint64
	for {
		kv, next, err := c.b.rdb.HScan(ctx, c.b.k.claims(dlq), cursor, "", readersPage).Result()
		if err != nil {
			return nil, fail(err, "claim readers on %s", dlq)
		}
		for i := 1; i < len(kv); i += 2 { // field, value, field, value…
			if cl, ok := parseClaim(kv[i]); ok && !cl.Sent && !cl.Owned && cl.At.After(now) && cl.Replay != replay && !slices.Contains(out, cl.Replay) {
				out = append(out, cl.Replay)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseClaim reads "<replay>|c|<expiry ms>", "<replay>|s|<ms>",
// "<replay>|o|<ms>", "<replay>|t|<ms>" and the take-over's "k" (claim)
// and "x" (send); a claim's At is its expiry, a send's or an ownership's
// its time.
func parseClaim(v string) (engine.Claim, bool) {
	f := strings.Split(v, "|")
	if len(f) != 3 || f[0] == "" {
		return engine.Claim{}, false
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || len(f[1]) != 1 || !strings.Contains("csotkx", f[1]) {
		return engine.Claim{}, false
	}
	st := f[1]
	return engine.Claim{Replay: f[0], Sent: st == "s" || st == "x", Owned: st == "o" || st == "t",
		TakenOver: st == "t" || st == "k" || st == "x", At: time.UnixMilli(ms).UTC()}, true
}
