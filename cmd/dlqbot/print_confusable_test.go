package main

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestTerminalPreviewFlagsMixedScriptTarget: a DLQ whose NServiceBus
// failures name two targets in their FailedQ header, one with a Cyrillic
// о where the other has a Latin o: the readable preview flags the
// look-alike (mixes Latin and Cyrillic letters, its name quoted with
// escapes) and only it, and the JSON marks that target mixed_scripts and
// not the plain one.
func TestTerminalPreviewFlagsMixedScriptTarget(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	plain, dlq := testkit.Name("orders"), testkit.Name("error")
	look := strings.Replace(plain, "o", "\u043e", 1) // Cyrillic о
	r.Queue(plain, nil)
	r.Queue(look, nil)
	r.Queue(dlq, nil)
	nsb := func(id, failedQ string) amqp.Publishing {
		return testkit.Msg(id, []byte(`{}`), amqp.Table{"NServiceBus.FailedQ": failedQ + "@host",
			"NServiceBus.ExceptionInfo.ExceptionType": "System.InvalidOperationException",
			"NServiceBus.ExceptionInfo.Message":       "failed", "NServiceBus.TimeOfFailure": "2026-12-01 10:00:00:000000 Z"})
	}
	r.Publish(dlq, nsb("plain-1", plain), nsb("look-1", look))
	r.WaitCount(dlq, 2, 20*time.Second)

	text, _, code := dlqbot(t, env, "preview", dlq)
	if code != 0 {
		t.Fatalf("preview exit %d:\n%s", code, text)
	}
	want := "  ! " + look + ` ("t-\u043erders-` // the escape shows which letter
	if !strings.Contains(text, want) || !strings.Contains(text, "mixes Latin and Cyrillic letters") {
		t.Errorf("the preview does not flag %q as mixing scripts (want %q):\n%s", look, want, text)
	}
	if n := strings.Count(text, "mixes "); n != 1 {
		t.Errorf("%d targets flagged as mixing scripts, want only the look-alike:\n%s", n, text)
	}

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	if code != 0 {
		t.Fatalf("preview --json exit %d:\n%s", code, out)
	}
	targets, _ := oneJSON(t, out)["targets"].([]any)
	flags := map[string]any{}
	for _, x := range targets {
		tv := x.(map[string]any)
		flags[tv["queue"].(string)] = tv["mixed_scripts"]
	}
	if len(flags) != 2 || flags[look] != true || flags[plain] != nil {
		t.Errorf("targets' mixed_scripts %v: want true for %q only", flags, look)
	}
}
