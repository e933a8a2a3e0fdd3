package main

import (
	"fmt"
	"github.com/stroma/dlqbot/redact"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/amqp"
)

// config is everything dlqbot reads from its environment (README
// "Configuration"). The names are relied on by deployments and other
// tools: keep them exactly.
type config struct {
	// logLevel, when set, is the log's level (the terminal's: warnings
	// and errors unless --verbose); nil means info.
	logLevel *zerolog.Level

	SlackBotToken      string        // SLACK_BOT_TOKEN
	SlackSigningSecret string        // SLACK_SIGNING_SECRET
	SlackAppToken      string        // SLACK_APP_TOKEN (Socket Mode when set)
	SlackAPIURL        string        // SLACK_API_URL (default Slack's)
	ActivityChannel    string        // DLQBOT_ACTIVITY_CHANNEL
	HTTPAddr           string        // DLQBOT_HTTP_ADDR (default :8080)
	PermissionsFile    string        // DLQBOT_PERMISSIONS
	AMQPURL            string        // AMQP_URL
	ManagementURL      string        // RABBITMQ_MANAGEMENT_URL
	ManagementTimeout  time.Duration // RABBITMQ_MANAGEMENT_TIMEOUT (0: amqp.DefaultHTTPTimeout)
	RedisURL           string        // REDIS_URL
	RedisPrefix        string        // DLQBOT_REDIS_PREFIX

	// Tuning (documented in the README).
	LeaseTTL       time.Duration // DLQBOT_LEASE_TTL (default 15s)
	ConnectionName string        // DLQBOT_CONNECTION_NAME (default "dlqbot"), shown in the management UI
	CanaryDepth    int           // DLQBOT_CANARY_DEPTH: how deep step 1 looks for failure classes (0: engine.DefaultCanaryDepth)

	// HTTP API and MCP (docs/api.md "HTTP API and MCP").
	APIChannel      string // DLQBOT_API_CHANNEL: where API/MCP previews and replays show in Slack
	MCPRequireHuman bool   // DLQBOT_MCP_REQUIRE_HUMAN: dlq_replay asks a person in Slack instead of starting
	MCPToken        string // DLQBOT_MCP_TOKEN: the principal `dlqbot mcp` (stdio) acts as

	// Client mode (docs/operating.md "Access control"): the terminal and `dlqbot mcp`
	// call the server's HTTP API instead of the broker and Redis.
	Server string // DLQBOT_SERVER: the dlqbot server's base URL (http://dlqbot.internal:8080)
	Token  string // DLQBOT_TOKEN: the caller's personal bearer token for that server

	// Access control and Slack's identity (README "Configuration").
	AccessOpen     bool          // DLQBOT_ACCESS=open: serve with Slack and no permissions file
	SlackTeamID    string        // DLQBOT_SLACK_TEAM_ID: the only workspace whose requests are served
	SlackAppID     string        // DLQBOT_SLACK_APP_ID: the only app whose requests are served
	ScanLimit      int           // DLQBOT_SCAN_LIMIT "<n>/<window>" or "off" (-1): scans per principal and DLQ
	ScanWindow     time.Duration // the window of DLQBOT_SCAN_LIMIT
	DialectHeaders string        // DLQBOT_DIALECT_HEADERS: an in-house dialect (engine.ParseHeaderDialect)

	// Dashboard and audit trail (docs/api.md "Dashboard and audit trail").
	AuditRetention    time.Duration  // DLQBOT_AUDIT_RETENTION (default 90 days)
	AuditMaxEntries   int64          // DLQBOT_AUDIT_MAX_ENTRIES (0: store.DefaultAuditMaxLen)
	AuditRate         int            // DLQBOT_AUDIT_RATE, entries per principal a minute (0: store.DefaultAuditRate)
	SessionKey        string         // DLQBOT_DASHBOARD_SESSION_KEY: signs sessions; ≥ 32 bytes
	TrustedProxies    []netip.Prefix // DLQBOT_DASHBOARD_TRUSTED_PROXIES: addresses whose identity headers count
	SlackWorkspaceURL string         // DLQBOT_SLACK_WORKSPACE_URL: links to replay threads
	DashboardURL      string         // DLQBOT_DASHBOARD_URL: the dashboard's address, linked from Slack lines
	// Privacy and integrity (docs/operating.md "Private by default").
	ExcerptBytes   int    // DLQBOT_EXCERPT_BYTES: payload excerpt size, 0 none (engine: 0 default 200, negative none)
	SigningKey     string // DLQBOT_SIGNING_KEY: signs frozen previews and replay records
	SigningKeyFile string // DLQBOT_SIGNING_KEY_FILE: the same, read from a file
	AcceptUnsigned bool   // DLQBOT_ACCEPT_UNSIGNED: read records written before signing was turned on

	// Whether DLQBOT_HTTP_ADDR and DLQBOT_REDIS_PREFIX were set (the demo
	// uses its own defaults otherwise).
	httpAddrSet, redisPrefixSet bool
}

// loadConfig reads the environment through getenv, applying the defaults.
// Every setting dlqbot reads is parsed here, once: a value that does not
// parse (DLQBOT_LEASE_TTL=abc, DLQBOT_MCP_REQUIRE_HUMAN=maybe, AMQP_URL=foo)
// is a usage error (exit 2) whose sentence names the variable, never a
// silent default.
func loadConfig(getenv func(string) string) (config, error) {
	get := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	c := config{
		SlackBotToken:      getenv("SLACK_BOT_TOKEN"),
		SlackSigningSecret: getenv("SLACK_SIGNING_SECRET"),
		SlackAppToken:      getenv("SLACK_APP_TOKEN"),
		SlackAPIURL:        get("SLACK_API_URL", "https://slack.com/api/"),
		ActivityChannel:    getenv("DLQBOT_ACTIVITY_CHANNEL"),
		HTTPAddr:           get("DLQBOT_HTTP_ADDR", ":8080"),
		PermissionsFile:    getenv("DLQBOT_PERMISSIONS"),
		AMQPURL:            get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
		ManagementURL:      get("RABBITMQ_MANAGEMENT_URL", "http://guest:guest@127.0.0.1:15672"),
		RedisURL:           get("REDIS_URL", "redis://127.0.0.1:6379/0"),
		RedisPrefix:        get("DLQBOT_REDIS_PREFIX", "dlqbot:"),
		ConnectionName:     get("DLQBOT_CONNECTION_NAME", "dlqbot"),
		DialectHeaders:     getenv("DLQBOT_DIALECT_HEADERS"),
		APIChannel:         getenv("DLQBOT_API_CHANNEL"),
		MCPToken:           getenv("DLQBOT_MCP_TOKEN"),
		Server:             getenv("DLQBOT_SERVER"),
		Token:              getenv("DLQBOT_TOKEN"),
		SigningKey:         getenv("DLQBOT_SIGNING_KEY"),
		SigningKeyFile:     getenv("DLQBOT_SIGNING_KEY_FILE"),
		SlackTeamID:        getenv("DLQBOT_SLACK_TEAM_ID"),
		SlackAppID:         getenv("DLQBOT_SLACK_APP_ID"),
		httpAddrSet:        getenv("DLQBOT_HTTP_ADDR") != "",
		redisPrefixSet:     getenv("DLQBOT_REDIS_PREFIX") != "",
	}
	var err error
	if c.MCPRequireHuman, err = envBool(getenv, "DLQBOT_MCP_REQUIRE_HUMAN"); err != nil {
		return c, err
	}
	if c.ManagementTimeout, err = envDuration(getenv, "RABBITMQ_MANAGEMENT_TIMEOUT"); err != nil {
		return c, err
	}
	if c.LeaseTTL, err = envDuration(getenv, "DLQBOT_LEASE_TTL"); err != nil {
		return c, err
	}
	if c.AuditRetention, err = envDuration(getenv, "DLQBOT_AUDIT_RETENTION"); err != nil {
		return c, err
	}
	if c.AuditRetention > 0 && c.AuditRetention < time.Hour {
		return c, usageError("DLQBOT_AUDIT_RETENTION=%q is under an hour; an audit trail is kept for days", getenv("DLQBOT_AUDIT_RETENTION"))
	}
	if v := getenv("DLQBOT_CANARY_DEPTH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, usageError("DLQBOT_CANARY_DEPTH=%q must be a whole number of messages, at least 1", v)
		}
		c.CanaryDepth = n
	}
	if v := getenv("DLQBOT_AUDIT_MAX_ENTRIES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1000 {
			return c, usageError("DLQBOT_AUDIT_MAX_ENTRIES=%q must be a whole number of entries, at least 1000", v)
		}
		c.AuditMaxEntries = n
	}
	if v := getenv("DLQBOT_AUDIT_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, usageError("DLQBOT_AUDIT_RATE=%q must be a whole number of entries per principal a minute, at least 1", v)
		}
		c.AuditRate = n
	}
	c.SessionKey = getenv("DLQBOT_DASHBOARD_SESSION_KEY")
	if c.SessionKey != "" && len(c.SessionKey) < 32 {
		return c, usageError("DLQBOT_DASHBOARD_SESSION_KEY must be at least 32 characters (for example: openssl rand -hex 32)")
	}
	if c.TrustedProxies, err = parseProxies(getenv("DLQBOT_DASHBOARD_TRUSTED_PROXIES")); err != nil {
		return c, err
	}
	c.SlackWorkspaceURL = getenv("DLQBOT_SLACK_WORKSPACE_URL")
	c.DashboardURL = getenv("DLQBOT_DASHBOARD_URL")
	if c.AcceptUnsigned, err = envBool(getenv, "DLQBOT_ACCEPT_UNSIGNED"); err != nil {
		return c, err
	}
	if v := getenv("DLQBOT_EXCERPT_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 2000 {
			return c, usageError("DLQBOT_EXCERPT_BYTES=%q must be a whole number of bytes from 0 (no payload excerpt) to 2000", v)
		}
		c.ExcerptBytes = n
		if n == 0 {
			c.ExcerptBytes = -1
		}
	}
	switch v := getenv("DLQBOT_ACCESS"); v {
	case "":
	case "open":
		c.AccessOpen = true
	default:
		return c, usageError("DLQBOT_ACCESS=%q is not a setting; the only one is DLQBOT_ACCESS=open (access control off, for a workspace where everyone may replay)", v)
	}
	if c.ScanLimit, c.ScanWindow, err = scanLimit(getenv("DLQBOT_SCAN_LIMIT")); err != nil {
		return c, err
	}
	for _, u := range []struct {
		name, value string
		schemes     []string
	}{
		{"SLACK_API_URL", c.SlackAPIURL, []string{"http", "https"}},
		{"REDIS_URL", c.RedisURL, []string{"redis", "rediss", "unix"}},
		{"DLQBOT_SLACK_WORKSPACE_URL", c.SlackWorkspaceURL, []string{"https", "http"}},
		{"DLQBOT_DASHBOARD_URL", c.DashboardURL, []string{"https", "http"}},
		{"DLQBOT_SERVER", c.Server, []string{"https", "http"}},
	} {
		if u.value == "" {
			continue
		}
		if err := checkURL(u.name, u.value, u.schemes); err != nil {
			return c, err
		}
	}
	// A cluster's nodes may be listed, separated by commas (amqp.Nodes).
	for _, u := range []struct {
		name, value string
		schemes     []string
	}{
		{"AMQP_URL", c.AMQPURL, []string{"amqp", "amqps"}},
		{"RABBITMQ_MANAGEMENT_URL", c.ManagementURL, []string{"http", "https"}},
	} {
		nodes, err := amqp.Nodes(u.value)
		if err != nil {
			return c, usageError("%s is not a URL or a comma-separated list of node URLs: %v", u.name, err)
		}
		for i, n := range nodes {
			name := u.name
			if len(nodes) > 1 {
				name = fmt.Sprintf("%s (node %d of %d)", u.name, i+1, len(nodes))
			}
			if err := checkURL(name, n, u.schemes); err != nil {
				return c, err
			}
		}
	}
	// The lists as a whole (one vhost for every AMQP node); New dials nothing.
	if _, err := amqp.New(amqp.Config{URL: c.AMQPURL, ManagementURL: c.ManagementURL}); err != nil {
		return c, usageError("AMQP_URL / RABBITMQ_MANAGEMENT_URL: %v", err)
	}
	if c.Server != "" {
		if err := checkServer(c.Server); err != nil {
			return c, err
		}
	}
	if c.Server != "" && c.Token == "" {
		return c, usageError("DLQBOT_SERVER is set but DLQBOT_TOKEN is not: a client of the dlqbot server needs its personal bearer token")
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return c, usageError("DLQBOT_HTTP_ADDR=%q is not a host:port address (like :8080): %v", c.HTTPAddr, err)
	}
	if _, err := engine.ParseHeaderDialect(c.DialectHeaders); err != nil {
		return c, usageError("DLQBOT_DIALECT_HEADERS is not a header dialect: %v", err)
	}
	return c, nil
}

// parseProxies reads DLQBOT_DASHBOARD_TRUSTED_PROXIES: addresses or
// CIDR ranges, comma-separated.
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, usageError("DLQBOT_DASHBOARD_TRUSTED_PROXIES: %q is not an IP address or CIDR range (like 10.0.0.5 or 10.0.0.0/24)", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, usageError("DLQBOT_DASHBOARD_TRUSTED_PROXIES: %q is not an IP address or CIDR range (like 10.0.0.5 or 10.0.0.0/24)", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// scanLimit parses DLQBOT_SCAN_LIMIT: "<n>/<window>" (like 30/10m),
// "off" (returned as -1), or unset (0: the operations' default).
func scanLimit(v string) (int, time.Duration, error) {
	if v == "" {
		return 0, 0, nil
	}
	if v == "off" {
		return -1, 0, nil
	}
	n, w, ok := strings.Cut(v, "/")
	k, err1 := strconv.Atoi(n)
	d, err2 := time.ParseDuration(w)
	if !ok || err1 != nil || err2 != nil || k < 1 || d < time.Second {
		return 0, 0, usageError("DLQBOT_SCAN_LIMIT=%q is not a limit; write scans per window like 30/10m, or off", v)
	}
	return k, d, nil
}

// envBool parses a boolean setting; unset means false.
func envBool(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, usageError("%s=%q is not a boolean (use true or false)", name, v)
	}
	return b, nil
}

// envDuration parses a positive duration setting; unset means zero (the
// consumer's documented default).
func envDuration(getenv func(string) string, name string) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, usageError("%s=%q is not a duration (like 15s or 1m)", name, v)
	}
	if d <= 0 {
		return 0, usageError("%s=%q must be a positive duration (like 15s)", name, v)
	}
	return d, nil
}

// checkURL refuses a URL setting that does not parse or has a scheme other
// than schemes.
func checkURL(name, v string, schemes []string) error {
	u, err := url.Parse(v)
	if err != nil {
		// url.Error repeats the URL, password included: say only which.
		return usageError("%s is not a URL (like %s://host)", name, schemes[0])
	}
	if !slices.Contains(schemes, u.Scheme) {
		return usageError("%s must be a %s URL, not %q", name, strings.Join(schemes, " or "), redact.URL(v))
	}
	if u.Scheme != "unix" && u.Host == "" {
		return usageError("%s has no host: %q", name, redact.URL(v))
	}
	return nil
}

// checkServer refuses a DLQBOT_SERVER (already an http(s) URL with a
// host) that is not a base URL the API's paths can follow: credentials
// (the token is the only one sent), a query or a fragment.
func checkServer(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return usageError("DLQBOT_SERVER is not a URL (like https://dlqbot.internal:8080)")
	}
	switch {
	case u.User != nil:
		return usageError("DLQBOT_SERVER must not hold a user name or password (%s): the server is called with DLQBOT_TOKEN only", redact.URL(v))
	case u.RawQuery != "" || u.ForceQuery:
		return usageError("DLQBOT_SERVER must be the server's base URL, without a query: %q", redact.URL(v))
	case u.Fragment != "" || strings.Contains(v, "#"):
		return usageError("DLQBOT_SERVER must be the server's base URL, without a fragment: %q", redact.URL(v))
	}
	return nil
}

// Exit statuses; scripts rely on them: keep them exactly.
const (
	exitOK     = 0 // success (a replay that finished)
	exitFailed = 1 // a refused or failed action
	exitUsage  = 2 // bad usage
)

// exitError carries an exit status with the error that caused it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}
