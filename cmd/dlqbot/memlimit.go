package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Memory limit defaults (README "Configuration"): when GOMEMLIMIT is unset,
// the Go runtime's soft memory limit is memLimitShare of the container's
// memory limit (cgroup v2 memory.max or v1 memory.limit_in_bytes), or
// memLimitFixed when the process runs without one. The limit is soft: the
// collector works harder near it, it never fails an allocation, and the
// runtime caps the collector's share of the CPU, so a replay slows rather
// than dies near it. GOMEMLIMIT (any value, "off" too) takes precedence.
//
// The limit bounds what the collector lets the heap grow to above the live
// heap; it cannot bound the live heap itself. It counts what the runtime
// maps (the heap, its spans not yet returned, its metadata), not the
// binary's own pages (some 10 MB of the resident set). Through the binary,
// a whole replay in one step keeps about 160 bytes live per message over
// some 26 MB (docs/benchmarks.md: 42 MB live at 100,000, 58 MB at
// 200,000, 193 MB at 1,000,000, where the resident set peaked at 305 MB
// under a limit of 280 MiB). memLimitFixed keeps that replay's resident
// set within 300 MB, with some 50 MB of room above its live heap for the
// collector. Several replays at once in one process need more: set
// GOMEMLIMIT.
const (
	memLimitShare = 0.7
	memLimitFixed = 256 << 20
)

// cgroupLimitFiles are where a container's memory limit is read, v2 first.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// defaultMemLimit returns the soft memory limit to set and whether to set
// one: none when GOMEMLIMIT is set (the runtime applied it already).
// readFile reads a cgroup file (os.ReadFile in the binary).
func defaultMemLimit(getenv func(string) string, readFile func(string) ([]byte, error)) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	for _, p := range cgroupLimitFiles {
		b, err := readFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		// "max" (v2) or a page-rounded MaxInt64 (v1) mean no limit.
		if err != nil || n <= 0 || n >= 1<<62 {
			break
		}
		return int64(float64(n) * memLimitShare), true
	}
	return memLimitFixed, true
}

// setMemoryLimit sets the runtime's soft memory limit (a variable so that
// tests can see what run sets without changing their own process's limit).
var setMemoryLimit = debug.SetMemoryLimit

// setMemLimit applies defaultMemLimit to the runtime. run calls it for
// every command: the terminal's preview and replay hold a whole preview
// and plan in memory just as serve's worker does.
func setMemLimit(getenv func(string) string) {
	if n, ok := defaultMemLimit(getenv, os.ReadFile); ok {
		setMemoryLimit(n)
	}
}
