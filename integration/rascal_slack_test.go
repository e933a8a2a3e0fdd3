package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestRascalImmediateNackThroughSlack: dead letters from a real rascal
// subscription (npm's rascal, republish with immediateNack: it nacks any
// redelivery without a newer x-death before its handler runs) are previewed
// in Slack, which says the consumer would refuse replayed copies and that the
// replay resets that; approved, the replay finishes and the fixed rascal
// handler really received every copy. The consumers are those of
// integration/interop (its setup.sh installs them).
func TestRascalImmediateNackThroughSlack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "interop/setup.sh").CombinedOutput(); err != nil {
		t.Fatalf("interop/setup.sh: %v\n%s", err, out)
	}
	const n = 5
	e := newEnv(t, options{})
	src, dlq := testkit.Name("rascal-slack"), testkit.Name("rascal-slack-dlq")
	e.rabbit.Topology(src, dlq, nil)
	failing := startRascal(t, src, dlq, true)
	var msgs []amqp.Publishing
	for i := 0; i < n; i++ {
		msgs = append(msgs, testkit.Msg(fmt.Sprintf("m-%d", i), testkit.Body(i, 100), nil))
	}
	e.rabbit.Publish(src, msgs...)
	e.rabbit.WaitCount(dlq, n, 60*time.Second)
	failing.stop()

	e.command("U0REQUEST1", "preview "+dlq)
	preview, token := e.waitPreview(1)
	text := preview.Content()
	for _, want := range []string{"Consumer would refuse replayed copies", "the replay resets it", "rascal"} {
		if !strings.Contains(text, want) {
			t.Errorf("preview lacks %q:\n%s", want, text)
		}
	}

	fixed := startRascal(t, src, dlq, false)
	e.click("U0APPROVE1", blocks.ActionApprove, token, preview.TS)
	e.waitProgress(preview.TS, "Finished", 3*time.Minute) // a loaded machine: the rascal consumer and the statistics lag
	r := e.replays()[0]
	e.rabbit.WaitCount(dlq, 0, 30*time.Second)
	testkit.Eventually(t, 30*time.Second, "the rascal handler to receive every copy", func() bool {
		return fixed.handledBy(r.ID) == n
	})
	fixed.stop()
	if got := fixed.handledBy(r.ID); got != n {
		t.Errorf("the rascal handler received %d copies of replay %s, want %d", got, r.ID, n)
	}
}

// rascalProc is a rascal consumer (integration/interop/testdata/node).
type rascalProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	seen map[string]int // replay id → copies handled
	out  []string
	done chan struct{}
	once sync.Once
}

func startRascal(t *testing.T, src, dlq string, fail bool) *rascalProc {
	t.Helper()
	arg, _ := json.Marshal(map[string]any{"url": strings.TrimSuffix(testkit.AMQPURL, "/"), "lib": "rascal",
		"queue": src, "dlq": dlq, "strategy": "immediateNack", "fail": fail})
	p := &rascalProc{cmd: exec.Command("node", "interop/testdata/node/consumer.js", string(arg)), seen: map[string]int{}, done: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var once sync.Once
		for sc.Scan() {
			var ev struct {
				Event    string `json:"event"`
				ReplayID string `json:"replayId"`
			}
			_ = json.Unmarshal(sc.Bytes(), &ev)
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			if ev.Event == "handled" {
				p.seen[ev.ReplayID]++
			}
			p.mu.Unlock()
			if ev.Event == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(p.stop)
	select {
	case <-ready:
	case <-p.done:
		t.Fatalf("rascal consumer exited:\n%s", strings.Join(p.out, "\n"))
	case <-time.After(60 * time.Second):
		t.Fatal("rascal consumer did not start within 60s")
	}
	return p
}

// handledBy returns how many copies of replay id the handler saw.
func (p *rascalProc) handledBy(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[id]
}

func (p *rascalProc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}
