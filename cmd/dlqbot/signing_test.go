package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestServeNeedsASigningKey: serve without a signing key exits 2 with a
// sentence naming DLQBOT_SIGNING_KEY and DLQBOT_ACCESS=open; with
// DLQBOT_ACCESS=open it starts (and warns); a short key is refused.
func TestServeNeedsASigningKey(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	delete(env, "DLQBOT_SIGNING_KEY")
	delete(env, "DLQBOT_ACCESS")
	_, stderr, code := dlqbot(t, merge(env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "serve")
	if code != 2 || !strings.Contains(stderr, "DLQBOT_SIGNING_KEY") || !strings.Contains(stderr, "DLQBOT_ACCESS=open") {
		t.Fatalf("serve without a key: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = dlqbot(t, merge(merge(env, "DLQBOT_HTTP_ADDR", freeAddr(t)), "DLQBOT_SIGNING_KEY", "short"), "serve")
	if code != 2 || !strings.Contains(stderr, "at least 32") {
		t.Fatalf("serve with a short key: exit %d, stderr %q", code, stderr)
	}
	addr := freeAddr(t)
	start(t, merge(merge(env, "DLQBOT_HTTP_ADDR", addr), "DLQBOT_ACCESS", "open"), "serve")
	testkit.Eventually(t, 20*time.Second, "/healthz with DLQBOT_ACCESS=open", func() bool { c, _ := get("http://" + addr + "/healthz"); return c == 200 })
}
