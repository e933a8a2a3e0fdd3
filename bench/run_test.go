package bench_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// dlqbotBinary returns the binary to measure: DLQBOT_BENCH_BIN, or
// bin/dlqbot at the repository's root built from this checkout now.
func dlqbotBinary(b *testing.B) string {
	if p := os.Getenv("DLQBOT_BENCH_BIN"); p != "" {
		return p
	}
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(here))
	bin := filepath.Join(root, "bin", "dlqbot")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/dlqbot")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build dlqbot: %v\n%s", err, out)
	}
	return bin
}

// dlqbotEnv is the environment the binary runs with: this process's,
// without anything that would change the binary's own defaults (GOMEMLIMIT,
// GOGC, a server, a permissions file), in the operator's direct mode on the
// test brokers with its own Redis prefix. DLQBOT_BENCH_GODEBUG becomes the
// binary's GODEBUG (gctrace=1 to see its collector); with
// DLQBOT_BENCH_STDERR=<dir> each run's stderr is written there.
func dlqbotEnv(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOMEMLIMIT", "GOGC", "GODEBUG", "DLQBOT_SERVER", "DLQBOT_TOKEN", "DLQBOT_PERMISSIONS",
			"DLQBOT_ACCESS", "DLQBOT_REDIS_PREFIX", "AMQP_URL", "RABBITMQ_MANAGEMENT_URL", "REDIS_URL":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "DLQBOT_ACCESS=open", "DLQBOT_REDIS_PREFIX="+prefix,
		"AMQP_URL="+testkit.AMQPURL, "RABBITMQ_MANAGEMENT_URL="+testkit.ManagementURL, "REDIS_URL="+testkit.RedisURL)
	if v := os.Getenv("DLQBOT_BENCH_GODEBUG"); v != "" {
		env = append(env, "GODEBUG="+v)
	}
	return env
}

// ran is one run of the binary.
type ran struct {
	out    map[string]any // its --json document
	raw    []byte
	stderr []byte
	took   time.Duration
	peakKB int64 // peak RSS: VmHWM, last read
	exit   int
}

// runDlqbot runs the binary with args and returns what it printed, how long
// it took and its peak resident set: /proc/<pid>/status's VmHWM, read
// every 20 ms while it runs. Not wait4's ru_maxrss: Linux carries the
// high-water mark across exec, so a child's includes this (larger) test
// process's resident set at the fork.
func runDlqbot(b *testing.B, bin string, env []string, args ...string) ran {
	b.Helper()
	// --verbose: the debug log, whose last lines say how many deliveries
	// the process received from each queue it read (deliveries).
	cmd := exec.Command(bin, append(args, "--verbose")...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", bin, err)
	}
	var mu sync.Mutex
	var hwm int64
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := vmHWM(cmd.Process.Pid); kb > 0 {
				mu.Lock()
				hwm = max(hwm, kb)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	took := time.Since(start)
	close(done)
	r := ran{raw: stdout.Bytes(), stderr: stderr.Bytes(), took: took}
	mu.Lock()
	r.peakKB = hwm
	mu.Unlock()
	if ee, ok := err.(*exec.ExitError); ok {
		r.exit = ee.ExitCode()
	} else if err != nil {
		b.Fatalf("run %s: %v", bin, err)
	}
	if dir := os.Getenv("DLQBOT_BENCH_STDERR"); dir != "" {
		name := filepath.Join(dir, strings.NewReplacer("/", "_").Replace(b.Name())+"."+args[0]+".stderr")
		_ = os.WriteFile(name, r.stderr, 0o644)
	}
	if err := json.Unmarshal(r.raw, &r.out); err != nil {
		b.Fatalf("dlqbot %s: not one JSON document (%v):\n%s\nstderr:\n%s", strings.Join(args, " "), err, r.raw, tail(r.stderr))
	}
	return r
}

// deliveries is how many deliveries the run received from queue, as the
// binary counted them where they arrived and logged them at exit (debug);
// -1 when its log does not say.
func deliveries(r ran, queue string) int64 {
	for _, line := range bytes.Split(r.stderr, []byte("\n")) {
		var l struct {
			Msg        string `json:"message"`
			Queue      string `json:"queue"`
			Deliveries int64  `json:"deliveries"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "amqp: deliveries received" && l.Queue == queue {
			return l.Deliveries
		}
	}
	return -1
}

// vmHWM is pid's peak resident set in KB, or 0 when it cannot be read.
func vmHWM(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// field returns the first value named key in doc, searched depth-first
// through nested objects.
func field(doc any, key string) any {
	switch v := doc.(type) {
	case map[string]any:
		if x, ok := v[key]; ok {
			return x
		}
		for _, x := range v {
			if f := field(x, key); f != nil {
				return f
			}
		}
	case []any:
		for _, x := range v {
			if f := field(x, key); f != nil {
				return f
			}
		}
	}
	return nil
}
