package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
)

// A replay's ledger decides what a run does: a confirmed copy's original
// is acked without another copy (the run counts duplicates), a pending
// intent is never sent again. So every part of it that says something was
// sent carries a MAC under Config.SigningKey, checked on every read:
//
//   - each entry of a log record, a member "m": 128 bits of the HMAC of
//     the replay id, the record's kind and time, the DLQ and the entry
//     (message id, target, seq, copy tag), so an entry cannot be moved to
//     another replay or DLQ, nor turned from an intent into a confirm;
//   - each segment of the acks hash, ending "#<MAC>" before its ";": 128
//     bits of the HMAC of the replay id, the field and the segment, so a
//     confirm cannot be forged nor moved to other copies.
//
// The MACs are per entry and per segment because the window scripts
// decide in Redis which of a window's entries are written (those the
// DLQ's sent index does not refuse); each is computed in Go before the
// write, and the key never reaches Redis. A page with an entry or segment
// that fails its check is refused whole (SignatureError, kind "ledger"):
// the engine then reads no page of it, so the replay runs no further
// rather than trust it. A MAC alone cannot show an entry deleted: the
// seals of the log's records and its signed tally (ledger_seal.go) show a
// record or an entry deleted, and the log cut back. A segment deleted
// from the acks is not shown: its copies then read as pending (in doubt,
// never sent again), not as never sent; docs/operating.md says what else
// is not.

// ledgerMACLen is how many bytes of an HMAC-SHA256 a ledger MAC keeps.
const ledgerMACLen = 16

// segMACSep ends a segment's body and starts its MAC.
const segMACSep = '#'

// ledgerMACer computes ledger MACs with one HMAC state, reset per MAC;
// it is not safe for concurrent use.
type ledgerMACer struct {
	h   hash.Hash
	buf []byte
	sum []byte
}

// ledgerMACer returns a MAC computer, or nil when the store has no key.
func (b *base) ledgerMACer() *ledgerMACer {
	if len(b.cfg.SigningKey) == 0 {
		return nil
	}
	return &ledgerMACer{h: hmac.New(sha256.New, b.cfg.SigningKey), sum: make([]byte, 0, sha256.Size)}
}

// field appends s, length first, so that no two field lists encode alike.
func (m *ledgerMACer) field(s string) {
	m.buf = binary.AppendUvarint(m.buf, uint64(len(s)))
	m.buf = append(m.buf, s...)
}

// mac is the truncated HMAC of what field appended since the last call.
func (m *ledgerMACer) mac() []byte {
	m.h.Reset()
	m.h.Write(m.buf)
	m.buf = m.buf[:0]
	m.sum = m.h.Sum(m.sum[:0])
	return m.sum[:ledgerMACLen]
}

// entry is the MAC of entry e of a log record of replayID, as its "m"
// member holds it (base64url, 22 characters).
func (m *ledgerMACer) entry(replayID, kind string, at int64, dlq string, e logEntry) string {
	m.field("ledger entry")
	m.field(replayID)
	m.field(kind)
	m.field(strconv.FormatInt(at, 10))
	m.field(dlq)
	m.field(e.ID)
	m.field(e.Target)
	m.field(strconv.Itoa(e.Seq))
	m.field(e.Copy)
	return base64.RawURLEncoding.EncodeToString(m.mac())
}

// segment is the MAC of an acks segment's body (without its ";") in
// field of replayID's acks, in hex.
func (m *ledgerMACer) segment(replayID, field, body string) string {
	m.field("ledger acks")
	m.field(replayID)
	m.field(field)
	m.field(body)
	return hex.EncodeToString(m.mac())
}

// signEntries sets the MAC of each entry of a record (nothing without a
// key).
func (b *base) signEntries(replayID, kind string, at int64, dlq string, es []logEntry) {
	m := b.ledgerMACer()
	if m == nil {
		return
	}
	for i := range es {
		es[i].MAC = m.entry(replayID, kind, at, dlq, es[i])
	}
}

// signSegment returns seg ("…;") with its MAC before the ";" (as it is
// without a key).
func (b *base) signSegment(replayID, field, seg string) string {
	m := b.ledgerMACer()
	if m == nil {
		return seg
	}
	body := strings.TrimSuffix(seg, ";")
	return body + string(segMACSep) + m.segment(replayID, field, body) + ";"
}

// ledgerCheck checks the MACs of one read of a ledger.
type ledgerCheck struct {
	b        *base
	m        *ledgerMACer
	replayID string
}

// checkLedger returns the checker of a read of replayID's ledger.
func (b *base) checkLedger(replayID string) *ledgerCheck {
	return &ledgerCheck{b: b, m: b.ledgerMACer(), replayID: replayID}
}

// entries checks every entry of rec; the first that fails refuses the
// read.
func (c *ledgerCheck) entries(rec *logRec) error {
	for _, e := range rec.Entries {
		if err := c.mac(e.MAC, func() string { return c.m.entry(c.replayID, rec.Kind, rec.At, rec.DLQ, e) }, "an entry"); err != nil {
			return err
		}
	}
	return nil
}

// segment checks one stored segment (without its ";") of field and
// returns its body.
func (c *ledgerCheck) segment(field, s string) (string, error) {
	body, sum := s, ""
	if i := strings.LastIndexByte(s, segMACSep); i >= 0 {
		body, sum = s[:i], s[i+1:]
	}
	return body, c.mac(sum, func() string { return c.m.segment(c.replayID, field, body) }, "a confirm or abandon record")
}

// mac compares a stored MAC with want's; what names the part checked.
func (c *ledgerCheck) mac(got string, want func() string, what string) error {
	switch {
	case got == "":
		return c.b.unsigned("ledger", c.replayID)
	case c.m == nil:
		return c.b.refuse("ledger", c.replayID, "its ledger is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	case subtle.ConstantTimeCompare([]byte(got), []byte(want())) != 1:
		return c.b.refuse("ledger", c.replayID, what+" of its ledger does not match its MAC (changed or added in Redis, or signed with another key); the ledger cannot be trusted")
	}
	return nil
}
