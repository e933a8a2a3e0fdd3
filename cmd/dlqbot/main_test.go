package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestMain lets tests run the real binary: the test executable re-executes
// itself with DLQBOT_RUN_MAIN=1 and then behaves exactly as dlqbot.
func TestMain(m *testing.M) {
	if os.Getenv("DLQBOT_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// proc is a dlqbot process started by a test.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	lines  []map[string]any // stderr JSON log lines
	done   chan struct{}
}

// start runs dlqbot with args and env in the background; it is killed when
// the test ends.
func start(t testing.TB, env map[string]string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DLQBOT_RUN_MAIN=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &lockedWriter{p: p}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.readLogs(stderr)
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	return p
}

func (p *proc) readLogs(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			m = map[string]any{"text": sc.Text()}
		}
		p.mu.Lock()
		p.lines = append(p.lines, m)
		p.mu.Unlock()
	}
}

// logged returns the first log line whose field key holds a value
// containing want.
func (p *proc) logged(key, want string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if s, ok := l[key].(string); ok && strings.Contains(s, want) {
			return l
		}
	}
	return nil
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stdout.Write(b)
}
