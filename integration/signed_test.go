package integration_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/blocks"
)

// TestEditedTokenInRedisIsRefused: with signed records, a preview token
// whose target someone changed in Redis is refused when approved in
// Slack: the approver is told, no replay is created, the DLQ keeps every
// message, the token is unused, and the log has an Error line naming it.
func TestEditedTokenInRedisIsRefused(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	e := newEnv(t, options{logs: logs, signingKey: []byte("integration-signing-key-0123456789abcdef")})
	src, dlq := dlqWith(e, 5)
	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	e.waitEphemeral("U0REQUEST1", 1) // the samples

	ctx := context.Background()
	keys, rdb := e.prefix+"{"+token+"}:token", e.rdb // store/keys.go's layout
	raw, err := rdb.Get(ctx, keys).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// The stored form: "DLQS1", a 32-byte MAC, then gzip-compressed JSON.
	// Whoever can write Redis keeps the MAC and changes the JSON.
	const head = 5 + 32
	zr, err := gzip.NewReader(bytes.NewReader(raw[head:]))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(plain), `"target":"`+src+`"`, `"target":"attacker.queue"`, 1)
	if changed == string(plain) {
		t.Fatalf("the token does not name its target %s: %s", src, plain)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(changed))
	_ = zw.Close()
	edited := append(append([]byte(nil), raw[:head]...), buf.Bytes()...)
	if err := rdb.Set(ctx, keys, edited, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	if got := e.waitEphemeral("U0APPROVE1", 1); !strings.Contains(got.Text, "signature check") || !strings.Contains(got.Text, "nothing was done") {
		t.Fatalf("the approver was told %q", got.Text)
	}
	if rs := e.replays(); len(rs) != 0 {
		t.Fatalf("%d replays from an edited token", len(rs))
	}
	if n := e.rabbit.Count(dlq); n != 5 {
		t.Fatalf("DLQ holds %d, want 5", n)
	}
	if l := logs.lines(`"level":"error"`, "signature check"); len(l) == 0 {
		t.Fatalf("no Error line in the log: %q", logs.lines("signature"))
	}
}
