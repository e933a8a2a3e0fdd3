package interop_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

var (
	setupOnce sync.Once
	setupOut  []byte
	setupErr  error
)

// requireSetup runs setup.sh once per test binary: it installs Node.js,
// the locked npm packages and python3-pika when they are missing.
func requireSetup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		setupOut, setupErr = exec.CommandContext(ctx, "./setup.sh").CombinedOutput()
	})
	if setupErr != nil {
		t.Fatalf("integration/interop/setup.sh: %v\n%s", setupErr, setupOut)
	}
}

// event is one JSON line a consumer wrote: a delivery its handler saw.
type event struct {
	Event        string `json:"event"`
	Lib          string `json:"lib"`
	Queue        string `json:"queue"`
	MessageID    string `json:"messageId"`
	BodySHA256   string `json:"bodySha256"`
	ReplayID     string `json:"replayId"`
	ReplayCount  int    `json:"replayCount"`
	ReplayedFrom string `json:"replayedFrom"`
	HasXDeath    bool   `json:"hasXDeath"`
	CC           any    `json:"cc"`
	Recovery     any    `json:"recovery"`
	Failed       bool   `json:"failed"`
	Error        string `json:"error"`
}

// consumer is a running consumer process.
type consumer struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	events []event
	lines  []string
	done   chan struct{}
	once   sync.Once
}

// nodeURL is an AMQP URL as amqplib and pika read it (vhost "/").
func nodeURL(amqpURL string) string {
	return strings.TrimSuffix(amqpURL, "/")
}

// startNode runs testdata/node/consumer.js with cfg and waits until it
// consumes.
func startNode(t *testing.T, b testkit.Broker, cfg map[string]any) *consumer {
	t.Helper()
	cfg["url"] = nodeURL(b.AMQPURL)
	return start(t, "node "+cfg["lib"].(string), "node", filepath.Join("testdata", "node", "consumer.js"), cfg)
}

// startPika runs testdata/python/consumer.py (Debian's python3 and
// python3-pika) on queue and waits until it consumes.
func startPika(t *testing.T, b testkit.Broker, queue string, fail bool) *consumer {
	t.Helper()
	cfg := map[string]any{"url": nodeURL(b.AMQPURL) + "/%2F", "queue": queue, "fail": fail}
	return start(t, "pika", "/usr/bin/python3", filepath.Join("testdata", "python", "consumer.py"), cfg)
}

func start(t *testing.T, name, prog, script string, cfg map[string]any) *consumer {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &consumer{name: name, cmd: exec.Command(prog, script, string(arg)), done: make(chan struct{})}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = c.cmd.Stdout // one stream: a crash's trace is kept with the events
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e event
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Event != "" {
				c.events = append(c.events, e)
			}
			c.mu.Unlock()
		}
		_ = c.cmd.Wait()
	}()
	t.Cleanup(c.stop)
	deadline := time.Now().Add(60 * time.Second)
	for !c.saw("ready") {
		select {
		case <-c.done:
			t.Fatalf("%s exited before consuming:\n%s", name, c.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start consuming within 60s:\n%s", name, c.output())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	return c
}

// saw reports whether the consumer wrote an event of kind.
func (c *consumer) saw(kind string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e.Event == kind {
			return true
		}
	}
	return false
}

// handled returns the deliveries the handler saw that match keep.
func (c *consumer) handled(keep func(event) bool) []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event
	for _, e := range c.events {
		if e.Event == "handled" && (keep == nil || keep(e)) {
			out = append(out, e)
		}
	}
	return out
}

// output is everything the process wrote, for failure messages.
func (c *consumer) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// stop ends the process: SIGTERM (it closes its connection), then SIGKILL
// after 10 s.
func (c *consumer) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// perMessage counts events by message id.
func perMessage(es []event) map[string]int {
	m := map[string]int{}
	for _, e := range es {
		m[e.MessageID]++
	}
	return m
}
