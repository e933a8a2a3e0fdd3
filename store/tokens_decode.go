package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/stroma/dlqbot/engine"
)

// errTokenFormat means a stored token is in no known format, or cut short.
var errTokenFormat = errors.New("not a preview token in a known format")

// decodeToken reverses encodeToken, and reads the JSON/gzip format of
// earlier releases too. The items are decoded chunk by chunk straight into
// one slice of Distinct items; their targets and groups are the class
// table's strings, shared.
func decodeToken(val []byte) (engine.Frozen, error) { return decodeTokenFirst(val, -1) }

// decodeTokenFirst is decodeToken that stops once it has decoded limit
// items or more (whole chunks; limit < 0: all of them), leaving the rest
// of the encoding unread. A token in the earlier format is decoded whole.
func decodeTokenFirst(val []byte, limit int) (engine.Frozen, error) {
	if isLegacyToken(val) {
		return decodeLegacyToken(val)
	}
	f, h, rest, err := decodeHead(val)
	if err != nil {
		return f, err
	}
	if h.Distinct > 0 {
		f.Items = make([]engine.Item, 0, h.Distinct)
		if limit >= 0 {
			f.Items = make([]engine.Item, 0, min(h.Distinct, limit+chunkItems))
		}
	}
	ended := false
	for !ended {
		if limit >= 0 && len(f.Items) >= limit {
			return f, nil
		}
		if len(rest) < 8 {
			return f, fmt.Errorf("decode: %w: a chunk is cut short", errTokenFormat)
		}
		n := int(binary.BigEndian.Uint32(rest))
		side := int(binary.BigEndian.Uint32(rest[4:]))
		rest = rest[8:]
		if n == 0 {
			ended = true
			break
		}
		if n > chunkItems || len(rest) < n*recordSize+side {
			return f, fmt.Errorf("decode: %w: a chunk of %d items is cut short", errTokenFormat, n)
		}
		recs, sides := rest[:n*recordSize], rest[n*recordSize:n*recordSize+side]
		rest = rest[n*recordSize+side:]
		var err error
		if f.Items, err = decodeChunk(f.Items, recs, sides, h.Classes); err != nil {
			return f, fmt.Errorf("decode: %w", err)
		}
	}
	if len(f.Items) != h.Distinct || len(rest) > 0 {
		return f, fmt.Errorf("decode: %w: %d of %d items", errTokenFormat, len(f.Items), h.Distinct)
	}
	return f, nil
}

// decodeChunk appends one chunk's items to items. The chunk's fingerprint
// ids are hex-encoded into one string that their IDs share: one
// allocation per chunk rather than one per item, a million fewer objects
// for the collector in a preview of 1,000,000.
func decodeChunk(items []engine.Item, recs, sides []byte, classes []tokenClass) ([]engine.Item, error) {
	var side []engine.Item            // the side table, decoded when a record needs it
	hexIDs := make([]byte, len(recs)) // 16 hex characters per 16-byte record
	for r := 0; r < len(recs); r += recordSize {
		hex.Encode(hexIDs[r:r+16], recs[r:r+8])
	}
	ids := string(hexIDs)
	for r := 0; r < len(recs); r += recordSize {
		rec := recs[r : r+recordSize]
		c := int(binary.BigEndian.Uint16(rec[12:14]))
		if c == sideClass {
			if side == nil {
				var err error
				if side, err = decodeSide(sides, classes); err != nil {
					return items, err
				}
			}
			i := binary.BigEndian.Uint64(rec[:8])
			if i >= uint64(len(side)) {
				return items, fmt.Errorf("%w: side entry %d of %d", errTokenFormat, i, len(side))
			}
			items = append(items, side[i])
			continue
		}
		if c >= len(classes) {
			return items, fmt.Errorf("%w: class %d of %d", errTokenFormat, c, len(classes))
		}
		items = append(items, engine.Item{
			ID:     ids[r : r+16],
			Count:  int(binary.BigEndian.Uint16(rec[14:16])),
			Target: classes[c].Target,
			Group:  classes[c].Group,
			Seq:    int(binary.BigEndian.Uint32(rec[8:12])),
		})
	}
	return items, nil
}

// decodeSide decodes a chunk's side table: whole items, their classes
// looked up in classes.
func decodeSide(b []byte, classes []tokenClass) ([]engine.Item, error) {
	var out []engine.Item
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return nil, fmt.Errorf("%w: a side entry is cut short", errTokenFormat)
		}
		id := string(b[n : n+int(l)])
		b = b[n+int(l):]
		count, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: a side entry is cut short", errTokenFormat)
		}
		b = b[n:]
		seq, n := binary.Varint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: a side entry is cut short", errTokenFormat)
		}
		b = b[n:]
		c, n := binary.Uvarint(b)
		if n <= 0 || c >= uint64(len(classes)) {
			return nil, fmt.Errorf("%w: a side entry's class is out of range", errTokenFormat)
		}
		b = b[n:]
		out = append(out, engine.Item{ID: id, Count: int(count), Target: classes[c].Target, Group: classes[c].Group, Seq: int(seq)})
	}
	return out, nil
}

// decodeHead decodes a binary token's header from val (which may hold only
// its beginning) and returns the header as a Frozen without items, the
// header itself, and what follows it.
func decodeHead(val []byte) (engine.Frozen, tokenHead, []byte, error) {
	var h tokenHead
	if len(val) < headPrefix || !bytes.Equal(val[:4], tokenMagic[:]) {
		return engine.Frozen{}, h, nil, fmt.Errorf("decode: %w", errTokenFormat)
	}
	end := headPrefix + int(binary.BigEndian.Uint32(val[4:8]))
	if len(val) < end {
		return engine.Frozen{}, h, nil, fmt.Errorf("decode: %w: the header is cut short", errTokenFormat)
	}
	if err := json.Unmarshal(val[headPrefix:end], &h); err != nil {
		return engine.Frozen{}, h, nil, fmt.Errorf("decode header: %w", err)
	}
	if h.Distinct < 0 {
		return engine.Frozen{}, h, nil, fmt.Errorf("decode: %w: %d items", errTokenFormat, h.Distinct)
	}
	f := engine.Frozen{Token: h.Token, DLQ: h.DLQ, Vhost: h.Vhost, Selection: h.Selection, To: h.To, Requester: h.Requester,
		CreatedAt: h.CreatedAt, ExpiresAt: h.ExpiresAt, Targets: h.Targets, Total: h.Total, ParkAfter: h.ParkAfter,
		Distinct: h.Distinct, Proof: h.Proof}
	for _, c := range h.Classes {
		if c.Target != "" && !slices.Contains(f.ItemTargets, c.Target) {
			f.ItemTargets = append(f.ItemTargets, c.Target)
		}
	}
	return f, h, val[end:], nil
}

// headLen is how many bytes of a stored binary token hold its header,
// known from its first headPrefix bytes; 0 when they are not a binary
// token's.
func headLen(prefix []byte) int {
	if len(prefix) < headPrefix || !bytes.Equal(prefix[:4], tokenMagic[:]) {
		return 0
	}
	return headPrefix + int(binary.BigEndian.Uint32(prefix[4:8]))
}
