package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/legacytoken"
	"github.com/stroma/dlqbot/store/tokencodec"
)

// oddItems are items the 16-byte record cannot hold, which go to a
// chunk's side table: ids that are not fingerprints (too short, upper
// case, not hex, empty, not UTF-8), counts and positions out of range.
var oddItems = []engine.Item{
	{ID: "m1", Count: 1, Target: "orders", Group: "rejected", Seq: 0},
	{ID: "0123456789ABCDEF", Count: 2, Target: "orders", Group: "rejected", Seq: 1},
	{ID: "0123456789abcdeg", Count: 1, Target: "orders", Group: "rejected", Seq: 2},
	{ID: "", Count: 1, Target: "orders", Group: "rejected", Seq: 3},
	{ID: "\xff\xfe-ü", Count: 1, Target: "orders", Group: "rejected", Seq: 4},
	{ID: "00000000000000aa", Count: math.MaxUint16, Target: "orders", Group: "rejected", Seq: 5},
	{ID: "00000000000000ab", Count: 70000, Target: "orders", Group: "rejected", Seq: math.MaxUint32 + 1},
	{ID: "00000000000000ac", Count: -1, Target: "", Group: "", Seq: -1},
}

// bigFrozen is a token of n fingerprint items over several chunks, with
// targets, groups and a selection that need JSON escaping, and oddItems
// in the middle.
func bigFrozen(n int) engine.Frozen {
	f := engine.Frozen{DLQ: "orders.dlq", Vhost: "/", Selection: `exception="items":null <x> & "ü"`, Requester: "U1",
		Targets: []engine.TargetSnapshot{{Queue: "orders", Exists: true, Consumers: 1, Messages: 3}}, ParkAfter: 3, To: "x"}
	groups := []string{"rejected", `Timeout "after" <n>s`, "Fehler: Zeitüberschreitung", "tab\there"}
	for i := 0; i < n; i++ {
		if i == n/2 {
			f.Items = append(f.Items, oddItems...)
		}
		f.Items = append(f.Items, engine.Item{ID: fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15), Count: 1 + i%3,
			Target: []string{"orders", "billing.ü", `q"uote`}[i%3], Group: groups[i%len(groups)], Seq: 2 * i})
	}
	for _, it := range f.Items {
		f.Total += it.Count
	}
	return f
}

// sameColumns reports how cols differ from items (column by column, as
// LoadColumns gives them), "" when they agree; the columns hold counts and
// DLQ positions in 32 bits, as a run's plan always has.
func sameColumns(cols engine.ItemColumns, items []engine.Item) string {
	if cols.Len() != len(items) || len(cols.Count) != len(items) || len(cols.Seq) != len(items) || len(cols.Class) != len(items) {
		return fmt.Sprintf("%d items in columns of %d, %d, %d, %d", len(items), cols.Len(), len(cols.Count), len(cols.Seq), len(cols.Class))
	}
	for i, it := range items {
		if int(cols.Class[i]) >= len(cols.Classes) {
			return fmt.Sprintf("item %d: class %d of %d", i, cols.Class[i], len(cols.Classes))
		}
		k := cols.Classes[cols.Class[i]]
		if cols.IDs[i] != it.ID || cols.Count[i] != int32(it.Count) || cols.Seq[i] != int32(it.Seq) || k != [2]string{it.Target, it.Group} {
			return fmt.Sprintf("item %d: %q ×%d at %d to %q, want %+v", i, cols.IDs[i], cols.Count[i], cols.Seq[i], k, it)
		}
	}
	return ""
}

// TestTokenBinaryRoundTrip saves a token of 10,000 items (three chunks,
// side entries in one of them) and loads it back unchanged from Redis; the
// stored value is the binary format, 16 bytes an item plus the header and
// the side entries, and its header alone loads with LoadHeader.
func TestTokenBinaryRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	f := bigFrozen(10_000)
	tok, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tk.Load(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Items, f.Items) || got.Selection != f.Selection || !reflect.DeepEqual(got.Targets, f.Targets) ||
		got.Total != f.Total || got.ParkAfter != 3 || got.To != "x" || got.Distinct != len(f.Items) {
		t.Fatalf("round trip changed the token: selection %q, %d items, total %d", got.Selection, len(got.Items), got.Total)
	}
	if want := []string{"orders", "billing.ü", `q"uote`}; !reflect.DeepEqual(got.ItemTargets, want) {
		t.Errorf("item targets %q, want %q", got.ItemTargets, want)
	}
	hc, cols, err := tk.LoadColumns(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if d := sameColumns(cols, f.Items); d != "" {
		t.Errorf("columns differ from the items: %s", d)
	}
	if hc.Items != nil || hc.Distinct != len(f.Items) || hc.Total != f.Total || !reflect.DeepEqual(hc.TargetQueues(), got.TargetQueues()) {
		t.Errorf("LoadColumns's header: %d items, distinct %d, total %d, targets %q", len(hc.Items), hc.Distinct, hc.Total, hc.TargetQueues())
	}
	raw, err := e.rdb.Get(e.ctx, e.st.b.k.token(tok)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, tokencodec.Magic[:]) {
		t.Fatalf("stored value starts %q, not the binary format's magic", raw[:8])
	}
	if per := float64(len(raw)-tokencodec.HeadLen(raw)) / float64(len(f.Items)); per > 17 {
		t.Errorf("stored %.1f bytes an item, want about 16", per)
	}
	h, err := tk.LoadHeader(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if h.Items != nil || h.Distinct != len(f.Items) || h.Total != f.Total || h.DLQ != f.DLQ || h.Requester != "U1" ||
		h.Token != tok || !h.CreatedAt.Equal(got.CreatedAt) || !h.ExpiresAt.Equal(got.ExpiresAt) {
		t.Errorf("header %+v differs from the token %+v", h, got)
	}
	if !reflect.DeepEqual(h.TargetQueues(), got.TargetQueues()) {
		t.Errorf("header's target queues %q, the token's %q", h.TargetQueues(), got.TargetQueues())
	}
}

// TestTokenLoadFirst loads the first items of a signed token of 10,000
// (an approval's): whole chunks from the start, the same as Load's, with
// Distinct saying how many there are; n < 0 or past the end gives all. A
// token changed in Redis is refused even when the change is past the
// items decoded.
func TestTokenLoadFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.SigningKey = testKey })
	tk := e.st.Tokens()
	f := bigFrozen(10_000)
	all := len(f.Items)
	tok, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, min, max int }{{10, 10, tokencodec.ChunkItems}, {tokencodec.ChunkItems + 1, tokencodec.ChunkItems + 1, 2 * tokencodec.ChunkItems}, {-1, all, all}, {20_000, all, all}} {
		got, err := tk.LoadFirst(e.ctx, tok, tc.n)
		if err != nil {
			t.Fatalf("first %d: %v", tc.n, err)
		}
		if len(got.Items) < tc.min || len(got.Items) > tc.max || got.Distinct != len(f.Items) || got.Total != f.Total {
			t.Errorf("first %d: %d items, distinct %d, total %d; want %d to %d of %d", tc.n, len(got.Items), got.Distinct, got.Total, tc.min, tc.max, len(f.Items))
		}
		if !reflect.DeepEqual(got.Items, f.Items[:len(got.Items)]) {
			t.Errorf("first %d: the items differ from the preview's first %d", tc.n, len(got.Items))
		}
	}
	key := e.st.b.k.token(tok)
	raw, err := e.rdb.Get(e.ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-20] ^= 1 // in the last chunk's records
	if err := e.rdb.Set(e.ctx, key, raw, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.LoadFirst(e.ctx, tok, 10); !errors.Is(err, engine.ErrBadSignature) {
		t.Errorf("a token changed past its first items loaded with %v, want %v", err, engine.ErrBadSignature)
	}
}

// TestTokenSavedFromEach writes a token from an iterator (as a preview
// does) and reads the same items back.
func TestTokenSavedFromEach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := bigFrozen(5000)
	items := f.Items
	f.Items, f.Each = nil, slices.Values(items)
	tok, err := e.st.Tokens().Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.st.Tokens().Load(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Items, items) {
		t.Fatalf("%d items back of %d, or changed", len(got.Items), len(items))
	}
}

// TestTokenLegacyFormatLoads stores tokens in the JSON/gzip format of
// earlier releases (written by the encoder they used, small and plain,
// and large and gzip-streamed) and loads them whole and by header.
func TestTokenLegacyFormatLoads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	for _, n := range []int{1, 5000} {
		f := bigFrozen(n)
		// JSON cannot hold an id that is not UTF-8.
		f.Items = slices.DeleteFunc(f.Items, func(it engine.Item) bool { return !utf8.ValidString(it.ID) })
		if n == 1 {
			f.Items = f.Items[:1]
			f.Total = f.Items[0].Count
		}
		tok, err := newToken()
		if err != nil {
			t.Fatal(err)
		}
		f.Token = tok
		val, err := legacytoken.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if gz := len(val) > 1 && val[0] == 0x1f; gz != (n > 1) {
			t.Fatalf("%d items: legacy value gzip %v", n, gz)
		}
		if err := e.rdb.Set(e.ctx, e.st.b.k.token(tok), val, 0).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := tk.Load(e.ctx, tok)
		if err != nil {
			t.Fatalf("%d items: %v", n, err)
		}
		if !reflect.DeepEqual(got.Items, f.Items) || got.Selection != f.Selection || got.Total != f.Total || got.Distinct != len(f.Items) {
			t.Fatalf("%d items: legacy token changed: %d items", n, len(got.Items))
		}
		h, err := tk.LoadHeader(e.ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if h.Items != nil || h.Distinct != len(f.Items) || h.Total != f.Total || !reflect.DeepEqual(h.TargetQueues(), got.TargetQueues()) {
			t.Errorf("%d items: legacy header %+v", n, h)
		}
		if _, cols, err := tk.LoadColumns(e.ctx, tok); err != nil {
			t.Errorf("%d items: legacy columns: %v", n, err)
		} else if d := sameColumns(cols, f.Items); d != "" {
			t.Errorf("%d items: legacy columns: %s", n, d)
		}
		if err := tk.Consume(e.ctx, tok, "r_legacy"); err != nil {
			t.Errorf("consume a legacy token: %v", err)
		}
	}
}

// TestTokenLongHeader loads the header of a token whose class table is
// longer than LoadHeader's first read.
func TestTokenLongHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := engine.Frozen{DLQ: "wide.dlq", Requester: "U1"}
	for i := 0; i < 2000; i++ {
		f.Items = append(f.Items, engine.Item{ID: fmt.Sprintf("%016x", i), Count: 1, Target: fmt.Sprintf("target-%04d", i%300),
			Group: fmt.Sprintf("rejected/SomeLongExceptionNameNumber%04d", i), Seq: i})
		f.Total++
	}
	tok, err := e.st.Tokens().Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw := e.rdb.Get(e.ctx, e.st.b.k.token(tok)).Val()
	if n := tokencodec.HeadLen([]byte(raw)); n <= headProbe {
		t.Fatalf("header of %d bytes fits the first read of %d: the test proves nothing", n, headProbe)
	}
	h, err := e.st.Tokens().LoadHeader(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if h.Distinct != 2000 || len(h.ItemTargets) != 300 || len(h.TargetQueues()) != 300 {
		t.Errorf("long header: %d items, %d targets", h.Distinct, len(h.ItemTargets))
	}
}

// TestTokenCorrupt: a stored value cut short or in no known format is an
// error (never a panic or a partial preview); a missing token is not found
// by LoadHeader either.
func TestTokenCorrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	val, err := tokencodec.Encode(bigFrozen(5000))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range [][]byte{val[:len(val)-8], val[:len(val)/2], val[:tokencodec.HeadLen(val)+3], val[:6], []byte("garbage")} {
		if _, err := tokencodec.Decode(cut); err == nil {
			t.Errorf("a value of %d bytes (of %d) decoded", len(cut), len(val))
		}
		if _, _, err := tokencodec.DecodeColumns(cut); err == nil {
			t.Errorf("a value of %d bytes (of %d) decoded column by column", len(cut), len(val))
		}
	}
	if _, err := tk.LoadHeader(e.ctx, "p_missing"); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("header of a missing token: %v", err)
	}
	tok, _ := newToken()
	_ = e.rdb.Set(e.ctx, e.st.b.k.token(tok), "garbage", 0).Err()
	if _, err := tk.LoadHeader(e.ctx, tok); err == nil || errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("header of a garbage value: %v", err)
	}
}

// FuzzDecodeToken: no stored value makes decoding panic, what decodes
// decodes column by column to the same items (and what does not, not),
// and encodes back to a value that decodes to the same items.
func FuzzDecodeToken(f *testing.F) {
	for _, fr := range []engine.Frozen{bigFrozen(3), {DLQ: "q"}, {DLQ: "q", Items: oddItems}} {
		val, err := tokencodec.Encode(fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(val)
	}
	f.Add([]byte(`{"dlq":"q","items":[{"id":"a","count":1}]}`))
	f.Fuzz(func(t *testing.T, val []byte) {
		got, err := tokencodec.Decode(val)
		_, cols, cerr := tokencodec.DecodeColumns(val)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("decoded whole: %v; column by column: %v", err, cerr)
		}
		if err == nil {
			if d := sameColumns(cols, got.Items); d != "" {
				t.Fatalf("columns differ from the items: %s", d)
			}
		}
		if err != nil || tokencodec.IsLegacy(val) {
			return
		}
		again, err := tokencodec.Encode(got)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := tokencodec.Decode(again)
		if err != nil || !reflect.DeepEqual(back.Items, got.Items) {
			t.Fatalf("round trip of a decoded token: %v", err)
		}
	})
}
