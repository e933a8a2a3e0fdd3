package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// drainSources are the packages whose shutdown work outlives the cancelled
// context: serve's HTTP shutdown, worker withdrawal and last Slack
// messages, the engine's final replay write and lease release, and the
// AMQP mover's wait for the confirms of the copies in flight.
var drainSources = []string{"../cmd/dlqbot/serve.go", "../engine/*.go", "../engine/review/*.go", "../engine/replay/*.go", "../engine/amqp/*.go"}

var (
	// outlives starts a wait that goes on after SIGTERM cancelled the
	// context: context.WithTimeout(context.WithoutCancel(…), d).
	outlives = regexp.MustCompile(`context\.WithTimeout\(context\.WithoutCancel\(`)
	seconds  = regexp.MustCompile(`^(\d+)\s*\*\s*time\.Second$`)
)

// drainBound adds up every wait that outlives a cancelled context in the
// drainSources, as if each ran after the other: an upper bound on how long
// `dlqbot serve` may take to exit after SIGTERM (besides Redis round trips
// without a deadline). A timeout named by a constant is resolved in the
// same package. It returns the bound and one line per wait.
func drainBound() (time.Duration, []string, error) {
	var total time.Duration
	var waits []string
	for _, pattern := range drainSources {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			return 0, nil, fmt.Errorf("no file matches %s: update drainSources", pattern)
		}
		consts := map[string]time.Duration{}
		srcs := map[string]string{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return 0, nil, err
			}
			srcs[f] = string(b)
			for _, m := range regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*(\d+)\s*\*\s*time\.Second\b`).FindAllStringSubmatch(string(b), -1) {
				n, _ := strconv.Atoi(m[2])
				consts[m[1]] = time.Duration(n) * time.Second
			}
		}
		for f, src := range srcs {
			for _, m := range outlives.FindAllStringIndex(src, -1) {
				expr, ok := timeoutArg(src[m[1]:])
				if !ok {
					return 0, nil, fmt.Errorf("%s: cannot read the arguments of %s…", f, src[m[0]:m[1]])
				}
				var d time.Duration
				if s := seconds.FindStringSubmatch(expr); s != nil {
					n, _ := strconv.Atoi(s[1])
					d = time.Duration(n) * time.Second
				} else if c, ok := consts[expr]; ok {
					d = c
				} else {
					return 0, nil, fmt.Errorf("%s: cannot read the timeout %q: write it as N * time.Second or a constant of that form", f, expr)
				}
				total += d
				waits = append(waits, fmt.Sprintf("%s: %s (%s)", f, d, expr))
			}
		}
	}
	sort.Strings(waits)
	if len(waits) == 0 {
		return 0, nil, fmt.Errorf("found no shutdown wait in %v: update drainSources", drainSources)
	}
	return total, waits, nil
}

// timeoutArg reads, from just inside context.WithoutCancel(, the
// timeout that follows it: in "ctx), 5*time.Second)" it is "5*time.Second".
func timeoutArg(rest string) (string, bool) {
	depth, i := 1, 0 // inside WithoutCancel(
	for ; i < len(rest) && depth > 0; i++ {
		switch rest[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
	}
	after, ok := strings.CutPrefix(strings.TrimSpace(rest[i:]), ",")
	if !ok {
		return "", false
	}
	depth = 1 // inside WithTimeout(
	for j := 0; j < len(after); j++ {
		switch after[j] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return strings.TrimSpace(after[:j]), true
			}
		}
	}
	return "", false
}

// TestDrainBound checks that the bound is found and still fits the grace
// periods chosen in compose.yaml and deploy/k8s (checked there against
// this same bound).
func TestDrainBound(t *testing.T) {
	d, waits, err := drainBound()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM drain bound %s:\n  %s", d, strings.Join(waits, "\n  "))
	// serve.go alone holds an HTTP shutdown and the Slack flush of 10 s
	// each; a bound below that means the patterns stopped matching.
	if d < 20*time.Second {
		t.Errorf("drain bound %s is implausibly small: the patterns no longer match the shutdown code", d)
	}
}

func TestTimeoutArg(t *testing.T) {
	for rest, want := range map[string]string{
		"ctx), 5*time.Second)":                       "5*time.Second",
		"r.Context()), 2 * time.Second)\n\tdefer":    "2 * time.Second",
		"parent),\n\t\tconfirmWait)":                 "confirmWait",
		"f(g(x), y)), time.Duration(n)*time.Second)": "time.Duration(n)*time.Second",
		"ctx))": "",
	} {
		got, ok := timeoutArg(rest)
		if got != want || ok != (want != "") {
			t.Errorf("timeoutArg(%q) = %q, %v; want %q", rest, got, ok, want)
		}
	}
}
