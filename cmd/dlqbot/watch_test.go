package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestServeWatchesTheDLQs: `dlqbot serve` with a watch: section in its
// permissions file posts one alert, within 60 s at the default tick, when
// 30 dead letters arrive in the watched DLQ, and its Preview button posts
// a preview in the channel for the person clicking.
func TestServeWatchesTheDLQs(t *testing.T) {
	t.Parallel()
	const secret, ch = "watch-secret", "C0WATCH"
	src, dlq := testkit.Name("src"), testkit.Name("wdlq")
	r := testkit.Dial(t)
	r.Topology(src, dlq, nil)
	perm := filepath.Join(t.TempDir(), "permissions.yaml")
	if err := os.WriteFile(perm, []byte("roles:\n  - name: sre\n    users: [U0SRE]\n    grants:\n      - queues: [\"*\"]\n        actions: [read]\n"+
		"watch:\n  - queues: [\""+dlq+"\"]\n    channel: "+ch+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stub := slackstub.New(secret)
	t.Cleanup(stub.Close)
	env := testEnv(t)
	delete(env, "DLQBOT_ACCESS")
	addr := freeAddr(t)
	for k, v := range map[string]string{"DLQBOT_PERMISSIONS": perm, "SLACK_BOT_TOKEN": "xoxb-watch", "SLACK_SIGNING_SECRET": secret,
		"SLACK_API_URL": stub.APIURL(), "DLQBOT_HTTP_ADDR": addr} {
		env = merge(env, k, v)
	}
	p := start(t, env, "serve")
	testkit.Eventually(t, 30*time.Second, "the watch's first sample", func() bool {
		l := p.Logged("message", "watch: first sample taken")
		return l != nil && l["dlqs"] == float64(1)
	})
	r.Reject(src, testkit.Msgs(30, 100)...)
	var alert slackstub.Message
	testkit.Eventually(t, 60*time.Second, "the alert", func() bool {
		for _, m := range stub.Messages(ch) {
			if strings.Contains(m.Content(), "30 new dead letters") {
				alert = m
				return true
			}
		}
		return false
	})
	resp, err := stub.Click("http://"+addr, blocks.ActionWatchPreview, dlq, "U0SRE", ch, alert.TS)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	testkit.Eventually(t, 30*time.Second, "the preview in the channel", func() bool {
		for _, m := range stub.Messages(ch) {
			if strings.Contains(string(m.RawBlocks), blocks.ActionApprove) {
				return true
			}
		}
		return false
	})
	if n := r.Count(dlq); n != 30 {
		t.Fatalf("the DLQ holds %d after the alert and the preview, want 30", n)
	}
}
