package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/stroma/dlqbot/engine"
)

// Records whose contents decide what is sent and who approved it are
// signed with HMAC-SHA256 under Config.SigningKey, a key that is never
// written to Redis: a frozen preview (its targets and messages) and a
// replay record (its approver, requester, selection and progress). The MAC
// covers the record's kind and id as well as its bytes, so a signed record
// cannot be moved under another token or replay id. Whoever can write
// Redis can still delete records, but not change one unnoticed.
//
// A frozen preview is stored as tokenSigMagic, the 32-byte MAC, then its
// encoding (JSON or gzip). A replay record stays JSON that Lua can read
// (cjson): its signature is a last member, "_sig", over the JSON without
// it.

// tokenSigMagic starts a signed frozen preview (neither JSON nor gzip do).
var tokenSigMagic = []byte("DLQS1")

// replaySigMember is how a replay record's signature ends its JSON.
const (
	replaySigOpen = `,"_sig":"`
	replaySigLen  = len(replaySigOpen) + 2*sha256.Size + len(`"}`)
)

// SignatureError is a record that failed its signature check. It wraps
// engine.ErrBadSignature.
type SignatureError struct {
	Kind   string // "preview" or "replay"
	ID     string // the token's reference (audit.TokenRef) or the replay id
	Reason string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("store: %s %s: %v: %s", e.Kind, e.ID, engine.ErrBadSignature, e.Reason)
}

func (e *SignatureError) Unwrap() error { return engine.ErrBadSignature }

// mac is the signature of a record of kind and id.
func (b *base) mac(kind, id string, data []byte) []byte {
	h := hmac.New(sha256.New, b.cfg.SigningKey)
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil)
}

// refuse reports a bad record through Config.OnBadSignature and returns
// its error.
func (b *base) refuse(kind, id, reason string) error {
	err := &SignatureError{Kind: kind, ID: id, Reason: reason}
	if b.cfg.OnBadSignature != nil {
		b.cfg.OnBadSignature(err)
	}
	return err
}

// unsigned decides about a record without a signature: accepted when the
// store has no key (nothing is signed) or Config.AcceptUnsigned allows
// records written before signing was turned on.
func (b *base) unsigned(kind, id string) error {
	if len(b.cfg.SigningKey) == 0 || b.cfg.AcceptUnsigned {
		return nil
	}
	return b.refuse(kind, id, "it carries no signature (written by a dlqbot without DLQBOT_SIGNING_KEY, or changed in Redis; DLQBOT_ACCEPT_UNSIGNED=true reads records from before the upgrade)")
}

// signToken returns a frozen preview's stored form.
func (b *base) signToken(token string, val []byte) []byte {
	if len(b.cfg.SigningKey) == 0 {
		return val
	}
	out := make([]byte, 0, len(tokenSigMagic)+sha256.Size+len(val))
	out = append(append(append(out, tokenSigMagic...), b.mac("preview", token, val)...), val...)
	return out
}

// openToken checks a stored frozen preview and returns its encoding.
func (b *base) openToken(token, ref string, stored []byte) ([]byte, error) {
	if !bytes.HasPrefix(stored, tokenSigMagic) {
		return stored, b.unsigned("preview", ref)
	}
	rest := stored[len(tokenSigMagic):]
	if len(b.cfg.SigningKey) == 0 {
		return nil, b.refuse("preview", ref, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	}
	if len(rest) < sha256.Size || !hmac.Equal(rest[:sha256.Size], b.mac("preview", token, rest[sha256.Size:])) {
		return nil, b.refuse("preview", ref, "its signature does not match its contents (changed in Redis, or signed with another key)")
	}
	return rest[sha256.Size:], nil
}

// signReplay returns a replay record's stored JSON.
func (b *base) signReplay(id string, data []byte) []byte {
	if len(b.cfg.SigningKey) == 0 || len(data) < 2 || data[len(data)-1] != '}' {
		return data
	}
	out := make([]byte, 0, len(data)+replaySigLen)
	out = append(out, data[:len(data)-1]...)
	out = append(out, replaySigOpen...)
	out = hex.AppendEncode(out, b.mac("replay", id, data))
	return append(out, `"}`...)
}

// openReplay checks a stored replay record and returns its JSON without
// the signature.
func (b *base) openReplay(id string, stored []byte) ([]byte, error) {
	n := len(stored)
	if n < replaySigLen+2 || !bytes.Equal(stored[n-replaySigLen:n-replaySigLen+len(replaySigOpen)], []byte(replaySigOpen)) {
		return stored, b.unsigned("replay", id)
	}
	if len(b.cfg.SigningKey) == 0 {
		return nil, b.refuse("replay", id, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	}
	data := append(append([]byte(nil), stored[:n-replaySigLen]...), '}')
	sig, err := hex.DecodeString(string(stored[n-replaySigLen+len(replaySigOpen) : n-2]))
	if err != nil || !hmac.Equal(sig, b.mac("replay", id, data)) {
		return nil, b.refuse("replay", id, "its signature does not match its contents (changed in Redis, or signed with another key)")
	}
	return data, nil
}
