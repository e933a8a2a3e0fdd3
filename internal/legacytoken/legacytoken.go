package legacytoken

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/stroma/dlqbot/engine"
)

// gzipOver is the encoded size above which a frozen preview is compressed.
const gzipOver = 4 << 10

// streamItemsOver is the item count above which encodeFrozen writes the
// items one by one into the compressor instead of marshalling the whole
// preview first: a 1,000,000-message token is ~90 MB of JSON, ~15 MB
// compressed, and only the compressed form is ever held.
const streamItemsOver = 256

// Encode returns f as JSON, gzip-compressed when larger than gzipOver
// bytes (JSON never starts with gzip's magic bytes, so decoding can tell).
// The JSON is the same whichever way it is written.
func Encode(f engine.Frozen) ([]byte, error) {
	if f.Each != nil || len(f.Items) > streamItemsOver {
		return streamFrozen(f)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(raw) <= gzipOver {
		return raw, nil
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// streamFrozen writes f's JSON into a gzip stream with its items (f.Each's
// when set, else f.Items) encoded one at a time.
func streamFrozen(f engine.Frozen) ([]byte, error) {
	items := f.Each
	if items == nil {
		items = slices.Values(f.Items)
	}
	f.Items, f.Each = nil, nil
	head, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	// The first `"items":null` is the field itself: any earlier string
	// value has its quotes escaped.
	at := bytes.Index(head, []byte(`"items":null`))
	if at < 0 {
		return nil, errors.New("encode: no items field")
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	w := &itemWriter{quoted: map[string][]byte{}}
	w.b = append(w.b, head[:at]...)
	w.b = append(w.b, `"items":[`...)
	first := true
	for it := range items {
		if !first {
			w.b = append(w.b, ',')
		}
		first = false
		if err := w.item(it); err != nil {
			return nil, err
		}
		if len(w.b) >= 64<<10 {
			if _, err := zw.Write(w.b); err != nil {
				return nil, err
			}
			w.b = w.b[:0]
		}
	}
	w.b = append(w.b, ']')
	w.b = append(w.b, head[at+len(`"items":null`):]...)
	if _, err := zw.Write(w.b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// itemWriter appends items as JSON, remembering the encoding of the
// targets and groups, which many items share.
type itemWriter struct {
	b      []byte
	quoted map[string][]byte
}

func (w *itemWriter) item(it engine.Item) error {
	w.b = append(w.b, `{"id":`...)
	if err := w.str(it.ID, false); err != nil {
		return err
	}
	w.b = append(w.b, `,"count":`...)
	w.b = strconv.AppendInt(w.b, int64(it.Count), 10)
	w.b = append(w.b, `,"target":`...)
	if err := w.str(it.Target, true); err != nil {
		return err
	}
	w.b = append(w.b, `,"group":`...)
	if err := w.str(it.Group, true); err != nil {
		return err
	}
	w.b = append(w.b, `,"seq":`...)
	w.b = strconv.AppendInt(w.b, int64(it.Seq), 10)
	w.b = append(w.b, '}')
	return nil
}

// str appends s as a JSON string: plain ASCII as is, anything else through
// encoding/json (remembered when shared).
func (w *itemWriter) str(s string, shared bool) error {
	if plainASCII(s) {
		w.b = append(w.b, '"')
		w.b = append(w.b, s...)
		w.b = append(w.b, '"')
		return nil
	}
	q, ok := w.quoted[s]
	if !ok {
		var err error
		if q, err = json.Marshal(s); err != nil {
			return err
		}
		if shared {
			w.quoted[s] = q
		}
	}
	w.b = append(w.b, q...)
	return nil
}

// plainASCII reports whether s needs no escaping in JSON.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}
