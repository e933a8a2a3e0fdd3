package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instr is one Dockerfile instruction, continuation lines joined.
type instr struct {
	cmd  string // upper case: FROM, RUN, COPY …
	args string
	line int
}

// stage is one FROM and the instructions after it.
type stage struct {
	image string // the base image, ARG defaults substituted
	name  string // the AS name, lower case ("" when unnamed)
	line  int
	body  []instr
}

// parseDockerfile splits a Dockerfile into stages. It understands what this
// repository uses: comments, line continuations, global ARG defaults and
// FROM … AS name.
func parseDockerfile(src string) ([]stage, error) {
	var instrs []instr
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(src, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue // comments may sit inside a continuation too
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		text := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		instrs = append(instrs, instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: continuation at end of file", start)
	}
	args := map[string]string{}
	var stages []stage
	for _, in := range instrs {
		switch {
		case in.cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.args, "=")
			args[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") { // --platform=…
				f = f[1:]
			}
			if len(f) == 0 {
				return nil, fmt.Errorf("line %d: FROM without an image", in.line)
			}
			s := stage{image: os.Expand(f[0], func(k string) string { return args[k] }), line: in.line}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = strings.ToLower(f[2])
			} else if len(f) != 1 {
				return nil, fmt.Errorf("line %d: cannot read FROM %s", in.line, in.args)
			}
			stages = append(stages, s)
		case len(stages) == 0:
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return stages, nil
}

var (
	digestRe = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	// exactRe is a tag naming one release: major.minor.patch, optionally
	// followed by a variant (1.26.8-bookworm, 3.22.2).
	exactRe = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+([-_.+][A-Za-z0-9._+-]*)?$`)
)

// pinned says why image is not pinned to one immutable image, or "".
func pinned(image string, earlier map[string]bool) string {
	if earlier[strings.ToLower(image)] || image == "scratch" {
		return ""
	}
	if strings.Contains(image, "$") {
		return "uses a variable without a default"
	}
	ref, digest, hasDigest := strings.Cut(image, "@")
	if hasDigest && !digestRe.MatchString("@"+digest) {
		return "has a malformed digest"
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	switch {
	case tag == "latest":
		return "uses the tag latest"
	case hasDigest:
		return ""
	case tag == "":
		return "is a bare name (no tag, no digest)"
	case !exactRe.MatchString(tag):
		return fmt.Sprintf("tag %q is not an exact version (major.minor.patch) and there is no digest", tag)
	}
	return ""
}

// copyArgs splits a COPY's arguments into flags, sources and destination.
func copyArgs(args string) (flags map[string]string, srcs []string, dst string, err error) {
	flags = map[string]string{}
	f := strings.Fields(args)
	for len(f) > 0 && strings.HasPrefix(f[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
		flags[k] = v
		f = f[1:]
	}
	if rest := strings.Join(f, " "); strings.HasPrefix(rest, "[") {
		f = nil
		if err := json.Unmarshal([]byte(rest), &f); err != nil {
			return nil, nil, "", err
		}
	}
	if len(f) < 2 {
		return nil, nil, "", fmt.Errorf("COPY needs a source and a destination")
	}
	return flags, f[:len(f)-1], f[len(f)-1], nil
}

// caCerts are the only files besides the binary that may be copied into the
// final image.
var caCerts = map[string]bool{"/etc/ssl/certs/ca-certificates.crt": true, "/etc/ssl/certs": true, "/etc/ssl/certs/": true}

// checkDockerfile returns every way src breaks the packaging rules; nil
// means none.
func checkDockerfile(src string) []string {
	stages, err := parseDockerfile(src)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if len(stages) < 2 {
		bad("%d stage(s): want a build stage and a small final stage", len(stages))
	}
	earlier := map[string]bool{}
	byName := map[string]stage{}
	for i, s := range stages {
		if why := pinned(s.image, earlier); why != "" {
			bad("line %d: FROM %s %s", s.line, s.image, why)
		}
		if s.name != "" {
			earlier[s.name] = true
			byName[s.name] = s
		}
		byName[fmt.Sprint(i)] = s
	}
	if len(stages) == 0 {
		return problems
	}
	final := stages[len(stages)-1]
	user, entry, cmd, expose := "", "", "", ""
	var binaries []string // destinations of the copied binary
	var builders []struct {
		stage stage
		src   string
	}
	for _, in := range final.body {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "CMD":
			cmd = in.args
		case "EXPOSE":
			expose = in.args
		case "ADD":
			bad("line %d: the final stage uses ADD: copy only the binary with COPY --from", in.line)
		case "RUN":
			bad("line %d: the final stage runs %q: it must only receive the binary", in.line, in.args)
		case "COPY":
			flags, srcs, dst, err := copyArgs(in.args)
			if err != nil {
				bad("line %d: %v", in.line, err)
				continue
			}
			from, ok := flags["from"]
			if !ok {
				bad("line %d: COPY %s copies from the build context, not from the build stage", in.line, in.args)
				continue
			}
			bs, ok := byName[strings.ToLower(from)]
			if !ok {
				bad("line %d: COPY --from=%s names no earlier stage", in.line, from)
				continue
			}
			for _, s := range srcs {
				switch {
				case caCerts[s]:
				case path.Base(s) == "dlqbot" && !strings.ContainsAny(s, "*?["):
					binaries = append(binaries, dst)
					builders = append(builders, struct {
						stage stage
						src   string
					}{bs, s})
				default:
					bad("line %d: the final stage copies %s: only the binary (and CA certificates) may be copied", in.line, s)
				}
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		bad("the final stage sets no USER: it would run as root")
	case !regexp.MustCompile(`^[0-9]+$`).MatchString(uid):
		bad("USER %s: use a numeric UID so runAsNonRoot can verify it", user)
	case strings.TrimLeft(uid, "0") == "":
		bad("USER %s is root", user)
	}
	if len(binaries) != 1 {
		bad("the final stage copies the dlqbot binary %d time(s), want once", len(binaries))
	}
	var ep []string
	if err := json.Unmarshal([]byte(entry), &ep); err != nil || len(ep) == 0 {
		bad("the final stage needs an exec-form ENTRYPOINT, got %q", entry)
	} else if len(binaries) == 1 && ep[0] != binaries[0] && ep[0] != path.Join(binaries[0], "dlqbot") {
		bad("ENTRYPOINT runs %s, but the binary is copied to %s", ep[0], binaries[0])
	}
	var c []string
	if err := json.Unmarshal([]byte(cmd), &c); err != nil || len(c) != 1 || c[0] != "serve" {
		bad(`the final stage's CMD is %q, want ["serve"]`, cmd)
	}
	if !strings.Contains(" "+expose+" ", " 8080 ") && !strings.Contains(" "+expose+" ", " 8080/tcp ") {
		bad("the final stage exposes %q, want 8080 (DLQBOT_HTTP_ADDR's default)", expose)
	}
	for _, b := range builders {
		checkBuild(b.stage, b.src, bad)
	}
	return problems
}

// checkBuild checks that stage s builds ./cmd/dlqbot into out as a static,
// trimmed binary.
func checkBuild(s stage, out string, bad func(string, ...any)) {
	cgoOff := false
	for _, in := range s.body {
		if in.cmd == "ENV" && regexp.MustCompile(`(^|\s)CGO_ENABLED[= ]0(\s|$)`).MatchString(in.args) {
			cgoOff = true
		}
	}
	for _, in := range s.body {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		cmd := in.args
		if !strings.Contains(cmd, "-o "+out+" ") && !strings.HasSuffix(cmd, "-o "+out) {
			continue
		}
		if !cgoOff && !regexp.MustCompile(`(^|\s)CGO_ENABLED=0(\s|$)`).MatchString(cmd) {
			bad("line %d: the build does not set CGO_ENABLED=0: the binary would need libc", in.line)
		}
		if !strings.Contains(cmd, "-trimpath") {
			bad("line %d: the build lacks -trimpath", in.line)
		}
		if !regexp.MustCompile(`-ldflags[= ]["']?-s -w["']?`).MatchString(cmd) {
			bad(`line %d: the build lacks -ldflags="-s -w"`, in.line)
		}
		if !regexp.MustCompile(`\./cmd/dlqbot/?(\s|$)`).MatchString(cmd) {
			bad("line %d: the build does not build ./cmd/dlqbot", in.line)
		}
		return
	}
	bad("stage %q has no `go build … -o %s` for the binary the final stage copies", s.name, out)
}

func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkDockerfile(string(src)) {
		t.Error(p)
	}
}

func TestDockerignoreKeepsTheContextSmall(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(src), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			have[l] = true
		}
	}
	for _, want := range []string{".git", "bin", "/dlqbot"} {
		if !have[want] {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	for _, needed := range []string{"go.mod", "go.sum", "cmd", "engine", "store", "*.go", "**/*.go"} {
		if have[needed] {
			t.Errorf(".dockerignore excludes %s, which the build needs", needed)
		}
	}
}

// good is a Dockerfile that passes; the cases below break it one way each.
const good = `
ARG GO=golang:1.26.8-bookworm
FROM ${GO} AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w" -o /out/dlqbot ./cmd/dlqbot
FROM gcr.io/distroless/static-debian12:nonroot@sha256:` + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + `
COPY --from=build /out/dlqbot /dlqbot
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/dlqbot"]
CMD ["serve"]
`

func TestCheckDockerfileRejects(t *testing.T) {
	if p := checkDockerfile(good); len(p) != 0 {
		t.Fatalf("the reference Dockerfile is refused: %v", p)
	}
	cases := []struct{ name, from, to, want string }{
		{"latest", "golang:1.26.8-bookworm", "golang:latest", "latest"},
		{"bare name", "golang:1.26.8-bookworm", "golang", "bare name"},
		{"minor only", "golang:1.26.8-bookworm", "golang:1.26-bookworm", "not an exact version"},
		{"short digest", "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "@sha256:0123", "malformed digest"},
		{"unpinned final", ":nonroot@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ":nonroot", "not an exact version"},
		{"root user", "USER 65532:65532", "USER 0", "is root"},
		{"named user", "USER 65532:65532", "USER nonroot", "numeric UID"},
		{"no user", "USER 65532:65532\n", "", "no USER"},
		{"copies the context", "COPY --from=build /out/dlqbot /dlqbot", "COPY --from=build /out/dlqbot /dlqbot\nCOPY . /app", "from the build context"},
		{"copies the source tree", "COPY --from=build /out/dlqbot /dlqbot", "COPY --from=build /out/dlqbot /src /dlqbot", "only the binary"},
		{"runs in final", "EXPOSE 8080", "EXPOSE 8080\nRUN touch /x", "runs"},
		{"shell entrypoint", `ENTRYPOINT ["/dlqbot"]`, "ENTRYPOINT /dlqbot", "exec-form ENTRYPOINT"},
		{"no entrypoint", `ENTRYPOINT ["/dlqbot"]`, "", "exec-form ENTRYPOINT"},
		{"cgo", "CGO_ENABLED=0 go build", "go build", "CGO_ENABLED=0"},
		{"no trimpath", "-trimpath", "", "-trimpath"},
		{"not stripped", `-ldflags="-s -w"`, "", "-s -w"},
		{"single stage", "FROM gcr.io/distroless/static-debian12:nonroot@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\nCOPY --from=build /out/dlqbot /dlqbot\n", "", "stage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(good, c.from) {
				t.Fatalf("the reference Dockerfile lacks %q", c.from)
			}
			df := strings.Replace(good, c.from, c.to, 1)
			problems := checkDockerfile(df)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Fatalf("no problem mentioning %q; got %v\n%s", c.want, problems, df)
		})
	}
}
