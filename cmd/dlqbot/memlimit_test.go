package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"sync"
	"testing"
)

func TestDefaultMemLimit(t *testing.T) {
	t.Parallel()
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(p string) ([]byte, error) {
			if s, ok := m[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOMEMLIMIT" {
				return v
			}
			return ""
		}
	}
	v2, v1 := cgroupLimitFiles[0], cgroupLimitFiles[1]
	for _, c := range []struct {
		name  string
		env   string
		files map[string]string
		want  int64
		set   bool
	}{
		{"GOMEMLIMIT set", "1GiB", map[string]string{v2: "1073741824\n"}, 0, false},
		{"GOMEMLIMIT off", "off", nil, 0, false},
		{"cgroup v2 limit", "", map[string]string{v2: "1073741824\n"}, 751619276, true},
		{"cgroup v2 no limit", "", map[string]string{v2: "max\n"}, memLimitFixed, true},
		{"cgroup v1 limit", "", map[string]string{v1: "2147483648\n"}, 1503238553, true},
		{"cgroup v1 no limit", "", map[string]string{v1: "9223372036854771712\n"}, memLimitFixed, true},
		{"no cgroup", "", nil, memLimitFixed, true},
		{"unreadable value", "", map[string]string{v2: "lots"}, memLimitFixed, true},
	} {
		got, set := defaultMemLimit(env(c.env), files(c.files))
		if got != c.want || set != c.set {
			t.Errorf("%s: limit %d set %v, want %d %v", c.name, got, set, c.want, c.set)
		}
	}
}

// memLimits records the limits run sets in the tests' process, where
// TestMain puts it in place of debug.SetMemoryLimit.
var memLimits limitRecorder

type limitRecorder struct {
	mu  sync.Mutex
	got []int64
}

func (r *limitRecorder) set(n int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, n)
	return n
}

func (r *limitRecorder) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

// TestRunSetsMemLimit checks that every command sets the default memory
// limit when GOMEMLIMIT is unset, the terminal's preview and replay as
// much as serve, and none when it is set. Not parallel: no other test
// calls run while it reads what run set.
func TestRunSetsMemLimit(t *testing.T) {
	want, _ := defaultMemLimit(func(string) string { return "" }, os.ReadFile)
	for _, args := range [][]string{
		{"preview", "t-no-such-dlq", "--json"},
		{"preview", "t-no-such-dlq", "source=a.work"},
		{"replay", "p_no_such_token", "rate=max", "--json"},
		{"approve", "p_no_such_token"},
		{"status", "--json"},
		{"audit", "verify"},
	} {
		memLimits.take()
		var out, errOut bytes.Buffer
		// No DLQBOT_ACCESS, no server: refused before touching RabbitMQ.
		_ = run(context.Background(), args, &out, &errOut, func(string) string { return "" })
		if got := memLimits.take(); len(got) != 1 || got[0] != want {
			t.Errorf("dlqbot %v set memory limits %v, want [%d]", args, got, want)
		}
		_ = run(context.Background(), args, &out, &errOut, func(k string) string {
			if k == "GOMEMLIMIT" {
				return "1GiB"
			}
			return ""
		})
		if got := memLimits.take(); len(got) != 0 {
			t.Errorf("dlqbot %v with GOMEMLIMIT set memory limits %v, want none (the runtime's)", args, got)
		}
	}
}
