package tokencodec

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// A frozen preview is stored as one byte string in the binary token format
// (version 1), which tokens_decode.go reads:
//
//	magic   4 bytes  "DQT\x01" (neither '{' nor gzip's 1f 8b: the JSON
//	                 format of earlier releases is told apart by its first bytes)
//	hlen    uint32   big-endian length of the header
//	header  hlen bytes of JSON (tokenHead): everything but the items —
//	                 token, DLQ, vhost, selection, requester, times, targets,
//	                 counts — and the class table
//	chunk…  each: uint32 n (records in it, ≤ ChunkItems; 0 ends the token),
//	              uint32 side (bytes of its side table), n records, the side table
//
// A record is 16 bytes, big-endian: id (8 bytes: the fingerprint's 64 bits,
// the 16 hex characters of engine.Fingerprint decoded), seq (uint32: the
// item's DLQ position), class (uint16: index into the class table) and
// count (uint16: identical copies). An item that does not fit — an id that
// is not a fingerprint, a count or seq out of range, a class index ≥
// 0xFFFF — has class 0xFFFF and, in its id bytes, the index of its entry in
// the chunk's side table, which holds it whole: uvarint id length, id,
// varint count, varint seq, uvarint class.
//
// The header comes first and uncompressed, so LoadHeader reads it with
// GETRANGE without transferring the items. The items are not compressed:
// 8 of every 16 bytes are hash bits, and gzip saved ~25% of the size for
// ~5× the encode time (docs/benchmarks.md). Encoding and decoding go chunk
// by chunk: the items are never held as JSON or twice decoded.
var Magic = [4]byte{'D', 'Q', 'T', 1}

const (
	// recordSize is the size of one item record.
	recordSize = 16
	// ChunkItems bounds the records of one chunk (64 KiB of records).
	ChunkItems = 4096
	// sideClass marks a record whose item is in the side table.
	sideClass = math.MaxUint16
	// headPrefix is magic plus the header's length.
	headPrefix = 8
)

// tokenHead is the binary token's header.
type tokenHead struct {
	Token     string                  `json:"token"`
	DLQ       string                  `json:"dlq"`
	Vhost     string                  `json:"vhost"`
	Selection string                  `json:"selection"`
	To        string                  `json:"to,omitempty"`
	Requester string                  `json:"requester"`
	CreatedAt time.Time               `json:"created_at"`
	ExpiresAt time.Time               `json:"expires_at"`
	Targets   []engine.TargetSnapshot `json:"targets"`
	Total     int                     `json:"total"`
	ParkAfter int                     `json:"park_after"`
	// Distinct is the number of items (records).
	Distinct int `json:"distinct"`
	// Proof is what an approval needs to prove that nothing previewed
	// left the DLQ without reading it (engine.ApprovalProof).
	Proof *engine.ApprovalProof `json:"proof,omitempty"`
	// Card is what the preview's channel post showed (engine.PreviewCard).
	Card *engine.PreviewCard `json:"card,omitempty"`
	// Classes is the class table: every (target, failure group) an item
	// refers to by index, in order of first use.
	Classes []tokenClass `json:"classes"`
}

// tokenClass is one entry of the class table.
type tokenClass struct {
	Target string `json:"target"`
	Group  string `json:"group"`
}

// Encode returns f in the binary token format. It goes over the items
// twice (f.Each's when set, else f.Items): once for the class table and
// the count, which the header carries, once to write the records.
func Encode(f engine.Frozen) ([]byte, error) {
	items := itemsOf(f)
	h := tokenHead{Token: f.Token, DLQ: f.DLQ, Vhost: f.Vhost, Selection: f.Selection, To: f.To, Requester: f.Requester,
		CreatedAt: f.CreatedAt, ExpiresAt: f.ExpiresAt, Targets: f.Targets, Total: f.Total, ParkAfter: f.ParkAfter,
		Proof: f.Proof, Card: f.Card}
	class := map[tokenClass]int{}
	for it := range items {
		c := tokenClass{Target: it.Target, Group: it.Group}
		if _, ok := class[c]; !ok {
			class[c] = len(h.Classes)
			h.Classes = append(h.Classes, c)
		}
		h.Distinct++
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	if len(head) > math.MaxUint32 {
		return nil, errors.New("encode: header too large")
	}
	chunks := (h.Distinct + ChunkItems - 1) / ChunkItems
	out := make([]byte, 0, headPrefix+len(head)+h.Distinct*recordSize+(chunks+1)*8)
	out = append(out, Magic[:]...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(head)))
	out = append(out, head...)
	w := chunkWriter{out: out}
	n := 0
	for it := range items {
		w.add(it, class[tokenClass{Target: it.Target, Group: it.Group}])
		n++
	}
	if n != h.Distinct {
		return nil, fmt.Errorf("encode: the items changed while written (%d, then %d)", h.Distinct, n)
	}
	w.flush()
	return binary.BigEndian.AppendUint64(w.out, 0), nil // n = 0, side = 0: the end
}

// chunkWriter appends chunks of records to out.
type chunkWriter struct {
	out   []byte
	start int    // offset of the open chunk's n
	n     int    // records in the open chunk
	side  []byte // the open chunk's side table
	sides uint64 // entries in it
	open  bool   // a chunk is open
}

// add appends it, of class c, to the open chunk (opening one when needed).
func (w *chunkWriter) add(it engine.Item, c int) {
	if !w.open {
		w.start, w.n, w.side, w.sides, w.open = len(w.out), 0, w.side[:0], 0, true
		w.out = append(w.out, 0, 0, 0, 0, 0, 0, 0, 0) // n and side, set by flush
	}
	var rec [recordSize]byte
	if id, ok := packedID(it.ID); ok && it.Count >= 0 && it.Count < math.MaxUint16 &&
		it.Seq >= 0 && it.Seq <= math.MaxUint32 && c < sideClass {
		copy(rec[:8], id[:])
		binary.BigEndian.PutUint32(rec[8:12], uint32(it.Seq))
		binary.BigEndian.PutUint16(rec[12:14], uint16(c))
		binary.BigEndian.PutUint16(rec[14:16], uint16(it.Count))
	} else {
		binary.BigEndian.PutUint64(rec[:8], w.sides)
		binary.BigEndian.PutUint16(rec[12:14], sideClass)
		w.side = binary.AppendUvarint(w.side, uint64(len(it.ID)))
		w.side = append(w.side, it.ID...)
		w.side = binary.AppendVarint(w.side, int64(it.Count))
		w.side = binary.AppendVarint(w.side, int64(it.Seq))
		w.side = binary.AppendUvarint(w.side, uint64(c))
		w.sides++
	}
	w.out = append(w.out, rec[:]...)
	w.n++
	if w.n == ChunkItems {
		w.flush()
	}
}

// flush closes the open chunk: its counts, then its side table.
func (w *chunkWriter) flush() {
	if !w.open {
		return
	}
	binary.BigEndian.PutUint32(w.out[w.start:], uint32(w.n))
	binary.BigEndian.PutUint32(w.out[w.start+4:], uint32(len(w.side)))
	w.out = append(w.out, w.side...)
	w.open = false
}

// packedID returns id's 64 bits when it is a fingerprint: 16 lowercase hex
// characters (so that decoding gives back the same text).
func packedID(id string) ([8]byte, bool) {
	var b [8]byte
	if len(id) != 16 {
		return b, false
	}
	for i := 0; i < 16; i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return b, false
		}
	}
	_, err := hex.Decode(b[:], []byte(id))
	return b, err == nil
}

// itemsOf is f's items as a sequence: f.Each when set, else f.Items.
func itemsOf(f engine.Frozen) iter.Seq[engine.Item] {
	if f.Each != nil {
		return f.Each
	}
	return slices.Values(f.Items)
}
