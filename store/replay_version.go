package store

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// A replay record's signature covers its contents but, alone, not its
// age or its side fields: an older signed copy written back, or the
// pending control (desired, desired_by) deleted, would still read as
// valid. So every write of a replay's hash is numbered:
//
//   - the record's JSON carries its version as a last member before the
//     signature, "_v" (so the version is signed with the contents);
//   - the hash's "ver" field holds the same number, and every write
//     compares it and sets the next one in one step (compare-and-set in
//     the write's script or transaction), so two writers never both
//     write on top of one version;
//   - the hash's "seal" field is the MAC of the replay id, the version
//     and the pending control (desired state and who asked), so that
//     deleting or changing the pending control, or pairing it with
//     another version, is seen;
//   - each process remembers the highest version it has read of each
//     replay, and refuses one older (the whole hash written back).
//
// The checks apply to signed records (with Config.SigningKey); without a
// key nothing is signed and the version is only the compare-and-set's.
// A record signed before versions existed (no "_v", no "ver", no "seal")
// is read as it is, and its next write numbers it.

// Fields of a replay's hash besides data, epoch and desired.
const (
	fieldDesiredBy = "desired_by" // who asked for the desired state
	fieldVersion   = "ver"        // the record's version
	fieldSeal      = "seal"       // MAC of id, version and pending control
)

// replayVersionMember is how a record's version is written into its JSON,
// after every other member and before the signature.
const replayVersionMember = `,"_v":`

// Refusals of a replay record that is valid on its own but not as the
// record's current state. Both are also engine.ErrBadSignature (through
// SignatureError), so every front end treats them as a record changed in
// Redis.
var (
	// ErrRecordRolledBack: the record is older than one already seen (an
	// older copy written back).
	ErrRecordRolledBack = errors.New("store: record older than one already seen")
	// ErrSideFieldsChanged: a field kept beside the signed record (the
	// pending control, the version) fails its check.
	ErrSideFieldsChanged = errors.New("store: record's side fields changed")
)

// replayHash is a replay's hash as read and checked.
type replayHash struct {
	data    []byte // the record's JSON, without its signature
	ver     int64  // its version (0: none yet)
	hasVer  bool   // the hash has a "ver" field
	desired string
	by      string
}

// replayFields is what a full read of a replay's hash asks for, in order.
var replayFields = []string{fieldData, fieldVersion, fieldDesired, fieldDesiredBy, fieldSeal}

// highWater remembers the highest version read of each replay, and
// when: a read is compared only with versions seen before it was issued
// (Redis had at least that version then, so an older one can only have
// been written back since), never with one a concurrent read saw first.
type highWater struct {
	mu   sync.Mutex
	tick int64
	seen map[string]seenVersion
}

// seenVersion is a version read and the tick it was recorded at.
type seenVersion struct{ ver, at int64 }

// maxHighWater bounds the replays remembered; past it the memory starts
// afresh (a rollback is then caught by the next process that read the
// newer version, or by the side fields).
const maxHighWater = 100_000

// start returns the tick a read is issued at.
func (h *highWater) start() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tick
}

// check refuses ver of a read issued at tick start when a newer version
// was seen before it, and remembers ver otherwise.
func (h *highWater) check(id string, ver, start int64) (seen int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil || len(h.seen) >= maxHighWater {
		h.seen = map[string]seenVersion{}
	}
	s := h.seen[id]
	switch {
	case ver < s.ver && s.at <= start:
		return s.ver, false
	case ver > s.ver:
		h.tick++
		h.seen[id] = seenVersion{ver: ver, at: h.tick}
	}
	return ver, true
}

// refuseAs is refuse with a sentinel of its own.
func (b *base) refuseAs(sentinel error, kind, id, reason string) error {
	err := &SignatureError{Kind: kind, ID: id, Reason: reason, Err: sentinel}
	if b.cfg.OnBadSignature != nil {
		b.cfg.OnBadSignature(err)
	}
	return err
}

// seal is the MAC of a replay's version and pending control ("" without a
// key).
func (b *base) seal(id string, ver int64, desired, by string) string {
	if len(b.cfg.SigningKey) == 0 {
		return ""
	}
	msg := strconv.FormatInt(ver, 10) + "\x00" + desired + "\x00" + by
	return hex.EncodeToString(b.mac("replay control", id, []byte(msg)))
}

// stampReplay returns a record's stored form at version ver: its JSON
// with "_v", signed.
func (b *base) stampReplay(id string, ver int64, data []byte) []byte {
	if len(data) < 2 || data[len(data)-1] != '}' {
		return data
	}
	if v, ok := recordVersion(data); ok || v < 0 {
		data = data[:bytes.LastIndex(data, []byte(replayVersionMember))]
		data = append(append([]byte(nil), data...), '}')
	}
	out := make([]byte, 0, len(data)+len(replayVersionMember)+20)
	out = append(out, data[:len(data)-1]...)
	out = append(out, replayVersionMember...)
	out = strconv.AppendInt(out, ver, 10)
	out = append(out, '}')
	return b.signReplay(id, out)
}

// recordVersion reads the "_v" that ends a record's JSON; ok is false
// when it has none (v is -1 when it has a malformed one).
func recordVersion(data []byte) (v int64, ok bool) {
	i := bytes.LastIndex(data, []byte(replayVersionMember))
	if i < 0 || data[len(data)-1] != '}' {
		return 0, false
	}
	v, err := strconv.ParseInt(string(data[i+len(replayVersionMember):len(data)-1]), 10, 64)
	if err != nil {
		return -1, false
	}
	return v, true
}

// parseHash reads the values of an HMGET of replayFields; ok is false when
// the record does not exist.
func parseHash(vals []any) (stored []byte, h replayHash, seal string, ok bool) {
	s, ok := vals[0].(string)
	if !ok {
		return nil, h, "", false
	}
	if v, isStr := vals[1].(string); isStr {
		h.ver, _ = strconv.ParseInt(v, 10, 64)
		h.hasVer = true
	}
	h.desired, _ = vals[2].(string)
	h.by, _ = vals[3].(string)
	seal, _ = vals[4].(string)
	return []byte(s), h, seal, true
}

// openHash checks a replay's hash: the record's signature, its version
// against the hash's, the seal over the pending control, and the version
// against the highest this process has read.
func (b *base) openHash(id string, stored []byte, h replayHash, seal string, start int64) (replayHash, error) {
	data, err := b.openReplay(id, stored)
	if err != nil {
		return h, err
	}
	h.data = data
	if len(b.cfg.SigningKey) == 0 || !signedReplay(stored) {
		return h, nil // unsigned: accepted by openReplay, nothing to check
	}
	dv, hasV := recordVersion(data)
	switch {
	case !hasV && dv < 0:
		return h, b.refuseAs(ErrSideFieldsChanged, "replay", id, "its version is malformed")
	case !hasV && !h.hasVer && seal == "":
		return h, nil // signed before records were numbered
	case !hasV:
		return h, b.refuseAs(ErrRecordRolledBack, "replay", id, fmt.Sprintf(
			"it carries no version but the record is at version %d (an older copy written back in Redis)", h.ver))
	case !h.hasVer || dv != h.ver:
		return h, b.refuseAs(ErrRecordRolledBack, "replay", id, fmt.Sprintf(
			"it is version %d but the record is at version %d (an older copy written back, or the version changed, in Redis)", dv, h.ver))
	}
	if err := b.checkControl(id, h, seal, start); err != nil {
		return h, err
	}
	return h, nil
}

// checkControl checks a replay's pending control against its seal and
// its version against the highest read before start (highWater.start,
// taken before the read was issued).
func (b *base) checkControl(id string, h replayHash, seal string, start int64) error {
	if !hmacEqualHex(seal, b.seal(id, h.ver, h.desired, h.by)) {
		return b.refuseAs(ErrSideFieldsChanged, "replay", id,
			"its pending control (desired state, who asked) or version does not match its seal (changed or deleted in Redis)")
	}
	if seen, ok := b.versions.check(id, h.ver, start); !ok {
		return b.refuseAs(ErrRecordRolledBack, "replay", id, fmt.Sprintf(
			"it is version %d, older than version %d read before (an older copy written back in Redis)", h.ver, seen))
	}
	return nil
}

// hmacEqualHex compares two hex MACs in constant time.
func hmacEqualHex(a, b string) bool {
	x, err1 := hex.DecodeString(a)
	y, err2 := hex.DecodeString(b)
	return err1 == nil && err2 == nil && len(x) > 0 && hmac.Equal(x, y)
}

// signedReplay reports whether a stored record carries a signature.
func signedReplay(stored []byte) bool {
	n := len(stored)
	return n >= replaySigLen+2 && bytes.Equal(stored[n-replaySigLen:n-replaySigLen+len(replaySigOpen)], []byte(replaySigOpen))
}

// readHash reads and checks a replay's whole hash; ok is false when the
// record does not exist.
func (rs *Replays) readHash(ctx context.Context, c redis.Cmdable, id string) (replayHash, bool, error) {
	start := rs.b.versions.start()
	vals, err := c.HMGet(ctx, rs.b.k.replay(id), replayFields...).Result()
	if err != nil {
		return replayHash{}, false, err
	}
	stored, h, seal, ok := parseHash(vals)
	if !ok {
		return replayHash{}, false, nil
	}
	h, err = rs.b.openHash(id, stored, h, seal, start)
	return h, true, err
}

// readControl reads and checks a replay's version and pending control
// without its record, for the owner's frequent reads; ok is false when
// the record does not exist. A hash without version or seal is read
// whole, since only a record from before versions may lack them.
func (rs *Replays) readControl(ctx context.Context, id string) (replayHash, bool, error) {
	key := rs.b.k.replay(id)
	start := rs.b.versions.start()
	pipe := rs.b.rdb.Pipeline()
	exists := pipe.HExists(ctx, key, fieldData)
	vals := pipe.HMGet(ctx, key, fieldVersion, fieldDesired, fieldDesiredBy, fieldSeal)
	if err := execPipe(ctx, pipe); err != nil {
		return replayHash{}, false, err
	}
	if !exists.Val() {
		return replayHash{}, false, nil
	}
	v := vals.Val()
	var h replayHash
	if s, ok := v[0].(string); ok {
		h.ver, _ = strconv.ParseInt(s, 10, 64)
		h.hasVer = true
	}
	h.desired, _ = v[1].(string)
	h.by, _ = v[2].(string)
	seal, _ := v[3].(string)
	if len(rs.b.cfg.SigningKey) == 0 {
		return h, true, nil
	}
	if !h.hasVer || seal == "" {
		return rs.readHash(ctx, rs.b.rdb, id)
	}
	return h, true, rs.b.checkControl(id, h, seal, start)
}

// verArg is the version a compare-and-set expects: "" when the hash has
// none.
func (h replayHash) verArg() string {
	if !h.hasVer {
		return ""
	}
	return strconv.FormatInt(h.ver, 10)
}

// readFail wraps an error of a checked read: a refused record as it is,
// anything else as a store failure.
func readFail(err error, format string, args ...any) error {
	if errors.Is(err, engine.ErrBadSignature) {
		return err
	}
	return fail(err, format, args...)
}
