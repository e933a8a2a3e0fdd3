package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// configEnv are the environment variables dlqbot reads: the fixed names of the README's configuration table
// and the two tuning settings it documents. A deployment file that
// sets any other name has a typo.
var configEnv = []string{
	"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL",
	"DLQBOT_ACTIVITY_CHANNEL", "DLQBOT_HTTP_ADDR", "DLQBOT_PERMISSIONS",
	"AMQP_URL", "RABBITMQ_MANAGEMENT_URL", "REDIS_URL", "DLQBOT_REDIS_PREFIX",
	"DLQBOT_LEASE_TTL", "DLQBOT_CONNECTION_NAME", "DLQBOT_SIGNING_KEY",
	"DLQBOT_ACCESS", "DLQBOT_SLACK_TEAM_ID", "DLQBOT_SLACK_APP_ID", "DLQBOT_SCAN_LIMIT",
}

// composeFile holds the parts of compose.yaml the checks read. It is
// decoded strictly: a key it does not know (a typo such as healthchek)
// is an error; add the field here when Compose really has it.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Hostname    string            `yaml:"hostname"`
	Build       *composeBuild     `yaml:"build"`
	Command     []string          `yaml:"command"`
	Ports       []string          `yaml:"ports"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	Volumes         []string `yaml:"volumes"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	ReadOnly        bool     `yaml:"read_only"`
	CapDrop         []string `yaml:"cap_drop"`
	SecurityOpt     []string `yaml:"security_opt"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func decodeStrict(src []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// mountsAt says whether one of a service's volumes is mounted at dir.
func mountsAt(volumes []string, dir string) bool {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == dir {
			return true
		}
	}
	return false
}

// checkCompose returns every way compose.yaml (src) breaks what issue 14
// asks of it, given the SIGTERM drain bound; nil means none.
func checkCompose(src []byte, drain time.Duration) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	var f composeFile
	if err := decodeStrict(src, &f); err != nil {
		return []string{"compose.yaml: " + err.Error()}
	}
	var names []string
	for n := range f.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"dlqbot", "rabbitmq", "redis"}) {
		bad("services %v, want dlqbot, rabbitmq and redis", names)
	}
	rabbit, redis, bot := f.Services["rabbitmq"], f.Services["redis"], f.Services["dlqbot"]
	for name, s := range map[string]composeService{"rabbitmq": rabbit, "redis": redis} {
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 {
			bad("%s has no healthcheck: dlqbot cannot wait for it to answer", name)
		}
		if !regexp.MustCompile(`^[a-z]+:[0-9]+\.[0-9]+\.[0-9]+(-[a-z0-9.-]+)?$`).MatchString(s.Image) {
			bad("%s's image %q is not pinned to an exact version", name, s.Image)
		}
	}

	// RabbitMQ 4 with the management API, which dlqbot needs.
	if !regexp.MustCompile(`^rabbitmq:4\.[0-9]+\.[0-9]+-management(-alpine)?$`).MatchString(rabbit.Image) {
		bad("rabbitmq's image %q is not RabbitMQ 4.x.y with management (rabbitmq:4.x.y-management)", rabbit.Image)
	}
	if mountsAt(rabbit.Volumes, "/var/lib/rabbitmq") && rabbit.Hostname == "" {
		bad("rabbitmq keeps its data in a volume but sets no hostname: a recreated container gets another node name and ignores the data")
	}
	user, pass := rabbit.Environment["RABBITMQ_DEFAULT_USER"], rabbit.Environment["RABBITMQ_DEFAULT_PASS"]
	if user == "" || user == "guest" || pass == "" {
		bad("rabbitmq keeps the guest user, which may only connect from localhost: set RABBITMQ_DEFAULT_USER and RABBITMQ_DEFAULT_PASS")
	}

	// Redis keeps the ledger: persistence, and no eviction.
	cmd := " " + strings.Join(redis.Command, " ") + " "
	if !strings.Contains(cmd, " --appendonly yes ") {
		bad("redis runs without --appendonly yes: a restart forgets the replays in flight")
	}
	if !strings.Contains(cmd, " --maxmemory-policy noeviction ") {
		bad("redis runs without --maxmemory-policy noeviction: it could evict leases and tokens")
	}
	if !mountsAt(redis.Volumes, "/data") {
		bad("redis's /data (its append-only file) is not a volume")
	}

	// dlqbot: built from the Dockerfile, the demo on one port, after the
	// services are healthy.
	if bot.Build == nil || filepath.Clean(bot.Build.Context) != "." || (bot.Build.Dockerfile != "" && bot.Build.Dockerfile != "Dockerfile") {
		bad("dlqbot is not built from the repository's Dockerfile (build: {context: ., dockerfile: Dockerfile})")
	}
	addr := ""
	if len(bot.Command) == 0 || bot.Command[0] != "demo" {
		bad("dlqbot's command %q does not run the demo", bot.Command)
	} else if i := slices.Index(bot.Command, "--addr"); i < 0 || i+1 >= len(bot.Command) {
		bad("dlqbot's demo has no --addr: it would listen on 127.0.0.1 inside its container, out of the host's reach")
	} else {
		addr = bot.Command[i+1]
	}
	host, port, err := net.SplitHostPort(addr)
	if addr != "" && (err != nil || (host != "" && host != "0.0.0.0")) {
		bad("the demo listens on %q: it must listen on every interface of its container (0.0.0.0:port)", addr)
	}
	if len(bot.Ports) != 1 {
		bad("dlqbot publishes %d ports, want exactly one (the demo page)", len(bot.Ports))
	} else {
		p := strings.TrimSuffix(bot.Ports[0], "/tcp")
		parts := strings.Split(p, ":")
		if len(parts) != 3 || parts[0] != "127.0.0.1" {
			bad("dlqbot publishes %q: publish the demo page (which has no login) on the host's loopback only, 127.0.0.1:host:container", bot.Ports[0])
		} else if port != "" && parts[2] != port {
			bad("dlqbot publishes container port %s but the demo listens on %s", parts[2], port)
		}
	}
	for _, dep := range []string{"rabbitmq", "redis"} {
		if c := bot.DependsOn[dep].Condition; c != "service_healthy" {
			bad("dlqbot depends on %s with condition %q, want service_healthy", dep, c)
		}
	}
	for k := range bot.Environment {
		if !slices.Contains(configEnv, k) {
			bad("dlqbot's environment sets %s, which dlqbot does not read", k)
		}
	}
	wantURL := func(name, scheme, hostport string, creds bool) {
		u, err := url.Parse(bot.Environment[name])
		if err != nil || u.Scheme != scheme || u.Host != hostport {
			bad("dlqbot's %s is %q, want %s://…%s", name, bot.Environment[name], scheme, hostport)
			return
		}
		if p, _ := u.User.Password(); creds && (u.User.Username() != user || p != pass) {
			bad("dlqbot's %s does not use rabbitmq's RABBITMQ_DEFAULT_USER and RABBITMQ_DEFAULT_PASS", name)
		}
	}
	wantURL("AMQP_URL", "amqp", "rabbitmq:5672", true)
	wantURL("RABBITMQ_MANAGEMENT_URL", "http", "rabbitmq:15672", true)
	wantURL("REDIS_URL", "redis", "redis:6379", false)
	if g, err := time.ParseDuration(bot.StopGracePeriod); err != nil || g <= drain {
		bad("dlqbot's stop_grace_period %q does not cover the SIGTERM drain (%s; Docker's default is 10s)", bot.StopGracePeriod, drain)
	}
	return problems
}

func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCompose(t *testing.T) {
	drain, _, err := drainBound()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkCompose(readRepoFile(t, "compose.yaml"), drain) {
		t.Error(p)
	}
}

func TestCheckComposeRejects(t *testing.T) {
	good := readRepoFile(t, "compose.yaml")
	const drain = 72 * time.Second
	if p := checkCompose(good, drain); len(p) != 0 {
		t.Fatalf("compose.yaml is refused: %v", p)
	}
	cases := []struct{ name, from, to, want string }{
		{"typo", "    healthcheck:\n      test: [\"CMD-SHELL\"", "    healthchek:\n      test: [\"CMD-SHELL\"", "healthchek"},
		{"rabbitmq 3", "rabbitmq:4.0.5-management", "rabbitmq:3.13.7-management", "RabbitMQ 4"},
		{"no management", "rabbitmq:4.0.5-management", "rabbitmq:4.0.5", "management"},
		{"unpinned", "redis:7.0.15", "redis:7", "exact version"},
		{"no aof", `"--appendonly", "yes", `, "", "appendonly"},
		{"eviction", "noeviction", "allkeys-lru", "noeviction"},
		{"not healthy", "condition: service_healthy", "condition: service_started", "service_healthy"},
		{"loopback demo", `"0.0.0.0:8088"`, `"127.0.0.1:8088"`, "every interface"},
		{"other port", `"127.0.0.1:8088:8088"`, `"127.0.0.1:8088:9000"`, "demo listens on"},
		{"public page", `"127.0.0.1:8088:8088"`, `"8088:8088"`, "loopback"},
		{"guest", "RABBITMQ_DEFAULT_USER: dlqbot", "RABBITMQ_DEFAULT_USER: guest", "guest"},
		{"wrong host", "redis://redis:6379/0", "redis://127.0.0.1:6379/0", "REDIS_URL"},
		{"wrong creds", "amqp://dlqbot:dlqbot@", "amqp://guest:guest@", "RABBITMQ_DEFAULT_USER"},
		{"env typo", "      REDIS_URL:", "      REDIS_ADDR:", "REDIS_ADDR"},
		{"short grace", "stop_grace_period: 90s", "stop_grace_period: 10s", "SIGTERM drain"},
		{"not built", "      context: .\n", "      context: ./cmd\n", "Dockerfile"},
		{"no hostname", "    hostname: rabbitmq\n", "", "hostname"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(c.from)) {
				t.Fatalf("compose.yaml lacks %q", c.from)
			}
			src := bytes.Replace(good, []byte(c.from), []byte(c.to), 1)
			problems := checkCompose(src, drain)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Fatalf("no problem mentioning %q; got %v", c.want, problems)
		})
	}
}

// composeCommand finds a Compose command: Docker's plugin (docker compose)
// or the standalone docker-compose (Debian's package). Neither needs a
// Docker engine for `config`.
func composeCommand(ctx context.Context) []string {
	if exec.CommandContext(ctx, "docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	return nil
}

// TestComposeConfig has Compose itself validate compose.yaml: `config`
// parses it, checks it against Compose's schema and prints it resolved.
// Without a Compose command it skips, except in CI, where it installs
// Debian's docker-compose with scripts/install-compose.sh.
func TestComposeConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := composeCommand(ctx)
	if cmd == nil && os.Getenv("CI") == "true" {
		out, err := exec.CommandContext(ctx, "../scripts/install-compose.sh").CombinedOutput()
		if err != nil {
			t.Fatalf("scripts/install-compose.sh: %v\n%s", err, out)
		}
		cmd = composeCommand(ctx)
	}
	if cmd == nil {
		t.Skip("no docker compose or docker-compose (run scripts/install-compose.sh); CI installs it")
	}
	args := append(cmd[1:], "--project-directory", "..", "-f", "../compose.yaml", "config")
	c := exec.CommandContext(ctx, cmd[0], args...)
	c.Env = append(os.Environ(), "COMPOSE_PROJECT_NAME=dlqbot")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", cmd[0], strings.Join(args, " "), err, stderr.String())
	}
	var resolved struct {
		Services map[string]map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &resolved); err != nil {
		t.Fatalf("cannot read what config printed: %v\n%s", err, out)
	}
	for _, s := range []string{"rabbitmq", "redis", "dlqbot"} {
		if resolved.Services[s] == nil {
			t.Errorf("config printed no service %s:\n%s", s, out)
		}
	}
	if len(resolved.Services) != 3 {
		t.Errorf("config printed %d services, want 3", len(resolved.Services))
	}
}
