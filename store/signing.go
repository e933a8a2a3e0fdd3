package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/store/tokencodec"
)

// Records whose contents decide what is sent and who approved it are
// signed with HMAC-SHA256 under Config.SigningKey, a key that is never
// written to Redis: a frozen preview (its targets and messages) and a
// replay record (its approver, requester, selection and progress). The MAC
// covers the record's kind and id as well as its bytes, so a signed record
// cannot be moved under another token or replay id. Whoever can write
// Redis can still delete records, but not change one unnoticed.
//
// A frozen preview in the binary format is stored as tokenSigMagic2, the
// 32-byte MAC of its header (tokencodec/encode.go: magic, length and header
// JSON, the class table included), the 32-byte MAC of its whole encoding,
// then the encoding: a permission check (LoadHeader) reads and checks
// only the header, and loading the items checks the whole. Tokens signed
// before the header had its own MAC (tokenSigMagic, one MAC over the
// whole) are still read, whole. A replay record stays JSON that Lua can read
// (cjson): its signature is a last member, "_sig", over the JSON without
// it.

// tokenSigMagic starts a frozen preview signed by one MAC over the whole
// (neither JSON, gzip nor the binary format start so); earlier releases
// wrote it.
var tokenSigMagic = []byte("DLQS1")

// tokenSigMagic2 starts a frozen preview signed twice: its header, and
// the whole.
var tokenSigMagic2 = []byte("DLQS2")

// tokenSig2Len is what precedes the encoding of a tokenSigMagic2 token.
const tokenSig2Len = 5 + 2*sha256.Size

// replaySigMember is how a replay record's signature ends its JSON.
const (
	replaySigOpen = `,"_sig":"`
	replaySigLen  = len(replaySigOpen) + 2*sha256.Size + len(`"}`)
)

// SignatureError is a record that failed its signature check. It wraps
// engine.ErrBadSignature and, when the record is signed but not current,
// Err (ErrRecordRolledBack or ErrSideFieldsChanged).
type SignatureError struct {
	Kind   string // "preview", "replay", "slack refs", "returns", "tap arrivals", …
	ID     string // the token's reference (audit.TokenRef) or the replay id
	Reason string
	Err    error // a sentinel saying more, or nil
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("store: %s %s: %v: %s", e.Kind, e.ID, engine.ErrBadSignature, e.Reason)
}

func (e *SignatureError) Unwrap() []error {
	if e.Err != nil {
		return []error{engine.ErrBadSignature, e.Err}
	}
	return []error{engine.ErrBadSignature}
}

// Record returns the refused record's kind and id (a token's reference,
// never the token), for a front end to name it.
func (e *SignatureError) Record() (kind, id string) { return e.Kind, e.ID }

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
	n := tokencodec.HeadLen(val)
	if n == 0 || n > len(val) {
		out := make([]byte, 0, len(tokenSigMagic)+sha256.Size+len(val))
		return append(append(append(out, tokenSigMagic...), b.mac("preview", token, val)...), val...)
	}
	out := make([]byte, 0, tokenSig2Len+len(val))
	out = append(out, tokenSigMagic2...)
	out = append(out, b.mac("preview header", token, val[:n])...)
	out = append(out, b.mac("preview", token, val)...)
	return append(out, val...)
}

// openToken checks a stored frozen preview and returns its encoding.
func (b *base) openToken(token, ref string, stored []byte) ([]byte, error) {
	if bytes.HasPrefix(stored, tokenSigMagic2) {
		if len(b.cfg.SigningKey) == 0 {
			return nil, b.refuse("preview", ref, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
		}
		if len(stored) < tokenSig2Len || !hmac.Equal(stored[5+sha256.Size:tokenSig2Len], b.mac("preview", token, stored[tokenSig2Len:])) {
			return nil, b.refuse("preview", ref, "its signature does not match its contents (changed in Redis, or signed with another key)")
		}
		return stored[tokenSig2Len:], nil
	}
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

// openTokenHead checks the header of a tokenSigMagic2 token: head is its
// stored form's beginning, holding at least the header (headSigned says
// how much that is). It returns the encoding's header bytes.
func (b *base) openTokenHead(token, ref string, head []byte) ([]byte, error) {
	if len(b.cfg.SigningKey) == 0 {
		return nil, b.refuse("preview", ref, "it is signed, but this dlqbot has no signing key (DLQBOT_SIGNING_KEY) to check it")
	}
	n := headSigned(head)
	if n == 0 || len(head) < n || !hmac.Equal(head[5:5+sha256.Size], b.mac("preview header", token, head[tokenSig2Len:n])) {
		return nil, b.refuse("preview", ref, "its header's signature does not match the header (changed in Redis, or signed with another key)")
	}
	return head[tokenSig2Len:n], nil
}

// headSigned is how many bytes of a stored tokenSigMagic2 token end its
// header, known from its first tokenSig2Len bytes and the binary token's
// magic and header length after them; 0 when they are not such a token's.
func headSigned(prefix []byte) int {
	if !bytes.HasPrefix(prefix, tokenSigMagic2) || len(prefix) < tokenSig2Len {
		return 0
	}
	n := tokencodec.HeadLen(prefix[tokenSig2Len:])
	if n == 0 {
		return 0
	}
	return tokenSig2Len + n
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
