package integration_test

import (
	"bytes"
	"context"
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
	// The stored form: "DLQS2", the header's and the whole's 32-byte MACs,
	// then the binary token (store/tokencodec/encode.go), whose header names
	// the targets in JSON.
	// Whoever can write Redis keeps the MAC and sends the copies to a
	// queue of their own (a name of the same length keeps the format).
	const head = 5 + 2*32
	if !bytes.HasPrefix(raw, []byte("DLQS2")) || len(raw) < head {
		t.Fatalf("the token is not signed: %q…", raw[:min(len(raw), 8)])
	}
	attacker := strings.Repeat("x", len(src))
	edited := bytes.Replace(raw, []byte(`"`+src+`"`), []byte(`"`+attacker+`"`), 1)
	if bytes.Equal(edited, raw) {
		t.Fatalf("the token does not name its target %s", src)
	}
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
