package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

func TestTerminalPreviewSaysHowReturnsWillBeFound(t *testing.T) {
	p := &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selected: 3,
		Returns: engine.ReturnsView{Mode: engine.ReturnsReread, Reads: 1, Detail: "returns will be found by re-reading the DLQ: 1 read(s)"}}
	var b bytes.Buffer
	printPreview(&b, p)
	if !strings.Contains(b.String(), "Finding returns:\n  ! returns will be found by re-reading the DLQ: 1 read(s)") {
		t.Fatalf("terminal preview:\n%s", b.String())
	}
}

func TestTerminalDetailsSayWhatTheFirstStepCovers(t *testing.T) {
	p := &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selected: 65,
		FirstStepDepth: 61, CanaryClasses: 2, Classes: 3}
	var b bytes.Buffer
	printDetails(&b, ops.DetailsOf(p))
	if !strings.Contains(b.String(), "First step: reads the first 61 message(s) of the DLQ, holding a copy of 2 of its 3 failure class(es)") {
		t.Fatalf("terminal preview:\n%s", b.String())
	}
}
