package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The audit trail is a hash chain: each entry's stream fields are its
// JSON ("e"), the previous entry's hash ("p") and its own hash ("h"), the
// HMAC-SHA256 under Config.SigningKey of "p" and "e" (a plain SHA-256
// without a key, which shows edits but not forgeries). Changing an entry
// breaks its hash; deleting one breaks the next entry's "p"; inserting
// one breaks the "p" of the entry after it. The oldest entries are
// trimmed (retention, cap) by the append itself, which keeps the last
// trimmed entry's id and hash as the chain's anchor (P{audit}:anchor), so
// the trail that is left still verifies from its first entry. Verify
// walks the chain and reports the first break.
//
// Whoever can write Redis can still remove the newest entries or the
// whole trail (and trim the oldest the way the append does); what they
// cannot do unseen is change, remove or add an entry in the middle.

// Defaults of the audit trail's bounds.
const (
	// DefaultAuditMaxLen caps the trail's entries.
	DefaultAuditMaxLen = 1_000_000
	// DefaultAuditRate is how many entries one principal may add per
	// minute.
	DefaultAuditRate = 600
	// auditTrimBatch bounds the entries one append trims.
	auditTrimBatch = 100
)

// ErrAuditRateLimited means a principal added more entries in the last
// minute than Config.AuditRate allows: the entry is not written (and the
// operation it records must not happen).
var ErrAuditRateLimited = errors.New("store: too many audit entries from this caller in the last minute")

// auditHash is an entry's chain hash after prev.
func (b *base) auditHash(prev string, entry []byte) string {
	var h interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	}
	if len(b.cfg.SigningKey) > 0 {
		h = hmac.New(sha256.New, b.cfg.SigningKey)
	} else {
		h = sha256.New()
	}
	_, _ = h.Write([]byte("audit\x00" + prev + "\x00"))
	_, _ = h.Write(entry)
	return hex.EncodeToString(h.Sum(nil))
}

// appendAuditScript appends one chained entry at the store clock's time,
// if the trail's last entry is still the one the hash was chained to,
// trimming the oldest entries past the retention or the cap first.
//
//	KEYS[1] the trail (stream), KEYS[2] its anchor (same slot)
//	ARGV[1] now, unix ms; ARGV[2] the oldest id kept (unix ms; 0: keep all)
//	ARGV[3] the entry's JSON, ARGV[4] the previous hash, ARGV[5] the
//	entry's hash, ARGV[6] the last entry's id as read ("" when none),
//	ARGV[7] the most entries kept (0: no cap)
//
// The id's milliseconds are now, or the last entry's when that is later
// (a clock that stepped back never reorders the trail). It returns the
// id, or "" when the last entry is not ARGV[6] (another append got in
// first).
var appendAuditScript = redis.NewScript(`
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local lastid = ''
if #last > 0 then lastid = last[1][1] end
if lastid ~= ARGV[6] then return '' end
local ms = tonumber(ARGV[1])
if #last > 0 then
  local lms = tonumber(string.match(lastid, '^(%d+)-'))
  if lms > ms then ms = lms end
end
local minid = tonumber(ARGV[2])
local batch = ` + strconv.Itoa(auditTrimBatch) + `
local old = {}
if minid > 0 then
  old = redis.call('XRANGE', KEYS[1], '-', '(' .. ARGV[2] .. '-0', 'COUNT', batch)
end
if tonumber(ARGV[7]) > 0 then
  local excess = math.min(redis.call('XLEN', KEYS[1]) + 1 - tonumber(ARGV[7]), batch)
  if excess > #old then old = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess) end
end
local drop = {}
local anchor = nil
for _, m in ipairs(old) do
  drop[#drop + 1] = m[1]
  local h = ''
  for j = 1, #m[2], 2 do
    if m[2][j] == 'h' then h = m[2][j + 1] end
  end
  anchor = m[1] .. ' ' .. h
end
if #drop > 0 then
  redis.call('XDEL', KEYS[1], unpack(drop))
  redis.call('SET', KEYS[2], anchor)
end
return redis.call('XADD', KEYS[1], ms .. '-*', 'e', ARGV[3], 'p', ARGV[4], 'h', ARGV[5])
`)

// lastAudit returns the trail's last entry id and the hash a new entry
// chains to: the last entry's, or the anchor's when the trail is empty.
func (a *Audit) lastAudit(ctx context.Context) (id, hash string, err error) {
	msgs, err := a.b.rdb.XRevRangeN(ctx, a.b.k.audit(), "+", "-", 1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", "", err
	}
	if len(msgs) > 0 {
		h, _ := msgs[0].Values["h"].(string)
		return msgs[0].ID, h, nil
	}
	_, hash, err = a.anchor(ctx)
	return "", hash, err
}

// anchor returns the id and hash of the last entry trimmed ("" when none).
func (a *Audit) anchor(ctx context.Context) (id, hash string, err error) {
	v, err := a.b.rdb.Get(ctx, a.b.k.auditAnchor()).Result()
	if errors.Is(err, redis.Nil) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	id, hash, _ = strings.Cut(v, " ")
	return id, hash, nil
}

// admitAudit counts one entry against principal's rate for the current
// minute; ErrAuditRateLimited past Config.AuditRate.
func (a *Audit) admitAudit(ctx context.Context, principal string) error {
	limit := a.b.cfg.AuditRate
	if limit <= 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(principal))
	minute := a.b.now().Unix() / 60
	key := a.b.k.auditRate(hex.EncodeToString(sum[:8]), minute)
	pipe := a.b.rdb.TxPipeline()
	n := pipe.Incr(ctx, key)
	pipe.Expire(ctx, key, 2*time.Minute)
	if _, err := pipe.Exec(ctx); err != nil {
		return fail(err, "record audit entry: rate")
	}
	if n.Val() > int64(limit) {
		return fmt.Errorf("store: record audit entry for %s: %w (%d a minute)", principal, ErrAuditRateLimited, limit)
	}
	return nil
}

// Writable reports whether an entry by principal could be written now:
// Redis answers and principal is within its rate (ErrAuditRateLimited
// otherwise). It takes nothing: a front end asks before an operation
// changes anything, so that an operation that cannot be recorded does
// not happen.
func (a *Audit) Writable(ctx context.Context, principal string) error {
	limit := a.b.cfg.AuditRate
	sum := sha256.Sum256([]byte(principal))
	n, err := a.b.rdb.Get(ctx, a.b.k.auditRate(hex.EncodeToString(sum[:8]), a.b.now().Unix()/60)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fail(err, "audit trail")
	}
	if limit > 0 && n >= int64(limit) {
		return fmt.Errorf("store: audit entry for %s: %w (%d a minute)", principal, ErrAuditRateLimited, limit)
	}
	return nil
}
