package main

import (
	"io/fs"
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
