package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"testing"

	"github.com/stroma/dlqbot/engine"
)

// TestTokenLargeStreamedRoundTrip saves a token of many items, with
// targets, groups and a selection that need JSON escaping, and loads it
// back unchanged from Redis; the stored value is gzip of the same JSON
// encoding/json would write.
func TestTokenLargeStreamedRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	f := engine.Frozen{DLQ: "orders.dlq", Vhost: "/", Selection: `exception="items":null <x> & "ü"`, Requester: "U1",
		Targets: []engine.TargetSnapshot{{Queue: "orders", Exists: true, Consumers: 1, Messages: 3}}, ParkAfter: 3}
	groups := []string{"rejected", `Timeout "after" <n>s`, "Fehler: Zeitüberschreitung", "tab\there"}
	for i := 0; i < 5000; i++ {
		f.Items = append(f.Items, engine.Item{ID: fmt.Sprintf("%016x", i*7919), Count: 1 + i%3,
			Target: []string{"orders", "billing.ü", `q"uote`}[i%3], Group: groups[i%len(groups)], Seq: i})
		f.Total += 1 + i%3
	}
	tok, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tk.Load(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Items, f.Items) || got.Selection != f.Selection || !reflect.DeepEqual(got.Targets, f.Targets) ||
		got.Total != f.Total || got.ParkAfter != 3 {
		t.Fatalf("round trip changed the token: selection %q, %d items, total %d", got.Selection, len(got.Items), got.Total)
	}
	raw, err := e.rdb.Get(e.ctx, e.st.b.k.token(tok)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("stored value is not gzip: %v", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	f.Token, f.CreatedAt, f.ExpiresAt = got.Token, got.CreatedAt, got.ExpiresAt
	want, _ := json.Marshal(f)
	var a, b any
	if err := json.Unmarshal(plain, &a); err != nil {
		t.Fatalf("stored value is not JSON: %v", err)
	}
	_ = json.Unmarshal(want, &b)
	if !reflect.DeepEqual(a, b) {
		t.Error("stored JSON differs from encoding/json's")
	}
}
