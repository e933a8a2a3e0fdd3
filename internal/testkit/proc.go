package testkit

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

// Proc is a process a test started (a dlqbot binary, usually): its stdout
// kept, its stderr read as JSON log lines (plain text lines become
// {"text": …}). It is killed when the test ends.
type Proc struct {
	Cmd *exec.Cmd
	// Done is closed once the process has exited and its logs are read.
	Done   chan struct{}
	mu     sync.Mutex
	stdout bytes.Buffer
	lines  []map[string]any
}

// Start runs path with args in the background, with the test's environment
// plus env.
func Start(t testing.TB, path string, env map[string]string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Proc{Cmd: cmd, Done: make(chan struct{})}
	cmd.Stdout = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.stdout.Write(b)
	})
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan struct{})
	go func() { defer close(logsDone); p.readLogs(stderr) }()
	go func() { <-logsDone; _ = cmd.Wait(); close(p.Done) }()
	t.Cleanup(p.Kill)
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func (p *Proc) readLogs(r io.Reader) {
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

// Logged returns the first log line whose field key holds a string
// containing want, or nil.
func (p *Proc) Logged(key, want string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if s, ok := l[key].(string); ok && strings.Contains(s, want) {
			return l
		}
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Kill()
	<-p.Done
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}

// Output returns stdout and the log lines so far, for failure messages.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	b.WriteString(p.stdout.String())
	for _, l := range p.lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
