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
