package main

import (
	"os"
	"testing"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestMain lets tests run the real binary: the test executable re-executes
// itself with DLQBOT_RUN_MAIN=1 and then behaves exactly as dlqbot.
func TestMain(m *testing.M) {
	if os.Getenv("DLQBOT_RUN_MAIN") == "1" {
		main()
		return
	}
	// The tests' own process keeps its memory limit: run records what it
	// would set instead (TestRunSetsMemLimit).
	setMemoryLimit = memLimits.set
	os.Exit(m.Run())
}

// start runs the real binary (this test executable, re-executed as
// dlqbot) with args and env in the background; it is killed when the test
// ends.
func start(t testing.TB, env map[string]string, args ...string) *testkit.Proc {
	t.Helper()
	return testkit.Start(t, os.Args[0], merge(env, "DLQBOT_RUN_MAIN", "1"), args...)
}
