package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// dlqbotBin is the dlqbot binary the runs start (DLQBOT_BIN, or built once
// by TestMain).
var dlqbotBin string

// TestMain builds the binary once when the chaos runs are enabled.
func TestMain(m *testing.M) {
	if os.Getenv("DLQBOT_CHAOS") != "1" {
		os.Exit(m.Run()) // every test skips itself
	}
	dlqbotBin = os.Getenv("DLQBOT_BIN")
	dir := ""
	if dlqbotBin == "" {
		var err error
		if dir, err = os.MkdirTemp("", "dlqbot-chaos-"); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
		dlqbotBin = filepath.Join(dir, "dlqbot")
		gobin := "go"
		if p, err := exec.LookPath("go"); err == nil {
			gobin = p
		}
		cmd := exec.Command(gobin, "build", "-o", dlqbotBin, "github.com/stroma/dlqbot/cmd/dlqbot")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: build dlqbot:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// gate skips t unless DLQBOT_CHAOS=1.
func gate(t *testing.T) {
	t.Helper()
	if os.Getenv("DLQBOT_CHAOS") != "1" {
		t.Skip("chaos runs only with DLQBOT_CHAOS=1 (make chaos)")
	}
}

// seed is the run's random seed: DLQBOT_CHAOS_SEED, else the clock. It is
// printed so that a run can be repeated exactly.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("DLQBOT_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DLQBOT_CHAOS_SEED=%q: %v", v, err)
		}
		s = n
	}
	t.Logf("seed %d (DLQBOT_CHAOS_SEED=%d repeats this run)", s, s)
	return s
}

var figureMu sync.Mutex

// figure reports one measured figure: in the test log and, when
// DLQBOT_CHAOS_OUT names a file, appended to it.
func figure(t *testing.T, name, format string, a ...any) {
	t.Helper()
	line := fmt.Sprintf("FIGURE %s: %s", name, fmt.Sprintf(format, a...))
	t.Log(line)
	if p := os.Getenv("DLQBOT_CHAOS_OUT"); p != "" {
		figureMu.Lock()
		defer figureMu.Unlock()
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("figure file: %v", err)
			return
		}
		defer f.Close()
		fmt.Fprintln(f, line)
	}
}

// start runs dlqbot with args and env in the background; it is killed when
// the test ends.
func start(t testing.TB, env map[string]string, args ...string) *testkit.Proc {
	t.Helper()
	return testkit.Start(t, dlqbotBin, env, args...)
}

// cli runs dlqbot to completion and returns stdout, stderr and the exit
// status.
func cli(t testing.TB, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlqbotBin, args...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return out.String(), errw.String(), code
}
