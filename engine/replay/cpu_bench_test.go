package replay_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stroma/dlqbot/internal/testkit"
)

// cpuMark is a moment's CPU account: this process's own CPU time (user
// and system, getrusage), the Redis server's (INFO cpu) and the whole
// machine's busy time (/proc/stat, all CPUs, everything but idle and
// iowait), so that a benchmark phase's CPU per message can be set beside
// a broker and a Redis that share the machine (the broker's share is the
// machine's less the other two).
type cpuMark struct {
	self, busy, redis time.Duration
}

// cpuNow reads the account now (busy is 0 where /proc/stat is missing).
func cpuNow() cpuMark {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	m := cpuMark{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), redis: testkit.RedisCPU()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var ticks int64
	for i := 1; i < len(f) && i <= 8; i++ {
		if i == 4 || i == 5 {
			continue
		}
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	m.busy = time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	return m
}

// since is the CPU spent from m to now.
func (m cpuMark) since() cpuMark {
	n := cpuNow()
	return cpuMark{self: n.self - m.self, busy: n.busy - m.busy, redis: n.redis - m.redis}
}
