package main

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTerminalInHouseDialect: DLQBOT_DIALECT_HEADERS names an in-house
// framework's headers, and the preview reads source, exception and attempts
// from them; a bad value is a usage error naming the variable, before
// anything is read.
func TestTerminalInHouseDialect(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("app-src"), testkit.Name("app-dlq")
	r.Queue(src, nil)
	r.Queue(dlq, nil)
	r.Publish(dlq, testkit.Msg("m-1", []byte(`{"n":1}`), amqp.Table{"x-app-source": src,
		"x-app-error": "invoice 881 locked", "x-app-attempts": int32(4)}))
	r.WaitCount(dlq, 1, 10*time.Second)

	env["DLQBOT_DIALECT_HEADERS"] = "source=x-app-source,exception=x-app-error,attempts=x-app-attempts"
	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, out)
	}
	msgs, _ := oneJSON(t, out)["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("preview messages: %v", out)
	}
	m := msgs[0].(map[string]any)
	if m["dialect"] != "inhouse" || m["source"] != src || m["attempts"] != float64(4) || m["failure_group"] != "invoice <n> locked" {
		t.Errorf("preview message: %v", m)
	}

	for _, bad := range []string{"exception=x-app-error", "source=x-a,colour=blue"} {
		env["DLQBOT_DIALECT_HEADERS"] = bad
		out, _, code = dlqbot(t, env, "preview", dlq, "--json")
		msg, _ := oneJSON(t, out)["error"].(string)
		if code != exitUsage || !strings.Contains(msg, "DLQBOT_DIALECT_HEADERS") {
			t.Errorf("%q: exit %d, error %q", bad, code, msg)
		}
	}
	if n := r.Count(dlq); n != 1 {
		t.Errorf("%s holds %d messages after the previews, want 1", dlq, n)
	}
}
