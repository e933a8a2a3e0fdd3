package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/internal/testkit"
)

// `dlqbot preview --details` prints the preview's mechanics — the first
// step's read and the failure classes it covers, how returns would be
// found — which the plain preview leaves out and points at; --details
// goes with preview only.
func TestTerminalPreviewDetails(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	r := testkit.Dial(t)
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	r.Reject(src, testkit.Msgs(12, 100)...)
	r.WaitCount(dlq, 12, 20*time.Second)
	r.Consume(src, func(amqp.Delivery) string { return "ack" })

	out, _, code := dlqbot(t, env, "preview", dlq, "--json")
	doc := oneJSON(t, out)
	depth, _ := doc["first_step_depth"].(float64)
	if code != 0 || depth == 0 {
		t.Fatalf("preview --json (exit %d): %s", code, out)
	}
	plain, _, code := dlqbot(t, env, "preview", dlq)
	if code != 0 || strings.Contains(plain, "First step") || !strings.Contains(plain, "preview "+dlq+" --details") {
		t.Fatalf("the plain preview (exit %d) shows the mechanics or does not say how to see them:\n%s", code, plain)
	}
	text, _, code := dlqbot(t, env, "preview", dlq, "--details")
	for _, want := range []string{
		"Token: p_",
		"Details of the preview of " + dlq,
		"Scanned 12 message(s)",
		fmt.Sprintf("First step: reads the first %d message(s) of the DLQ, holding a copy of %v of its %v failure class(es)", int(depth), doc["canary_classes"], doc["classes"]),
		"Finding returns: ",
		"Steps: the first holds one message of every target and failure group",
	} {
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("preview --details (exit %d) lacks %q:\n%s", code, want, text)
		}
	}
	if strings.Contains(text, "--details\n") {
		t.Errorf("preview --details still points at --details:\n%s", text)
	}
	if out, _, code := dlqbot(t, env, "status", "--details"); code != exitUsage || !strings.Contains(out, "--details goes with") {
		t.Errorf("status --details (exit %d): %s", code, out)
	}
}
