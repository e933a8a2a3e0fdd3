package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/engine"
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

func TestTerminalPreviewSaysWhatTheFirstStepCovers(t *testing.T) {
	p := &engine.Preview{DLQ: engine.QueueInfo{Name: "orders.dlq", Exists: true}, Selected: 65,
		FirstStepDepth: 61, CanaryClasses: 2, Classes: 3}
	var b bytes.Buffer
	printPreview(&b, p)
	if !strings.Contains(b.String(), "first step reads the first 61 message(s) of the DLQ and holds a copy of 2 of its 3 failure class(es)") {
		t.Fatalf("terminal preview:\n%s", b.String())
	}
}
