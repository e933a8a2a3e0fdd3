package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestConfigRefusesBadValues: each setting that does not parse stops dlqbot
// before it touches anything, with exit status 2 and a sentence naming the
// variable (DLQBOT_LEASE_TTL=abc used to be ignored silently).
func TestConfigRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"DLQBOT_LEASE_TTL", "abc"},
		{"DLQBOT_LEASE_TTL", "-5s"},
		{"DLQBOT_LEASE_TTL", "0s"},
		{"RABBITMQ_MANAGEMENT_TIMEOUT", "soon"},
		{"RABBITMQ_MANAGEMENT_TIMEOUT", "0s"},
		{"DLQBOT_MCP_REQUIRE_HUMAN", "maybe"},
		{"AMQP_URL", "http://127.0.0.1:5672/"},
		{"AMQP_URL", "127.0.0.1:5672"},
		{"RABBITMQ_MANAGEMENT_URL", "amqp://127.0.0.1:15672"},
		{"RABBITMQ_MANAGEMENT_URL", "http://%zz"},
		{"AMQP_URL", "amqp://u:p@n1:5672/,,amqp://u:p@n2:5672/"},
		{"AMQP_URL", "amqp://u:p@n1:5672/,http://n2:5672/"},
		{"AMQP_URL", "amqp://u:p@n1:5672/a,amqp://u:p@n2:5672/b"},
		{"RABBITMQ_MANAGEMENT_URL", "http://n1:15672,amqp://n2:15672"},
		{"RABBITMQ_MANAGEMENT_URL", "http://n1:15672,"},
		{"REDIS_URL", "localhost:6379"},
		{"SLACK_API_URL", "slack.com/api"},
		{"DLQBOT_HTTP_ADDR", "8080"},
		{"DLQBOT_DIALECT_HEADERS", "nonsense"},
		{"DLQBOT_EXCERPT_BYTES", "lots"},
		{"DLQBOT_EXCERPT_BYTES", "-1"},
		{"DLQBOT_ACCEPT_UNSIGNED", "maybe"},
		{"DLQBOT_SERVER", "dlqbot.internal:8080"},
		{"DLQBOT_AUDIT_MAX_ENTRIES", "10"},
		{"DLQBOT_AUDIT_RATE", "0"},
		{"DLQBOT_CANARY_DEPTH", "deep"},
		{"DLQBOT_CANARY_DEPTH", "0"},
		{"DLQBOT_CANARY_DEPTH", "-10"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			getenv := func(k string) string {
				if k == tc.name {
					return tc.value
				}
				return ""
			}
			_, err := loadConfig(getenv)
			if err == nil {
				t.Fatalf("loadConfig accepted %s=%q", tc.name, tc.value)
			}
			if !strings.Contains(err.Error(), tc.name) {
				t.Errorf("error %q does not name %s", err, tc.name)
			}
			var stderr strings.Builder
			// run must stop before any subcommand: "serve" would dial the
			// broker and listen if the bad value got through.
			err = run(context.Background(), []string{"serve"}, &strings.Builder{}, &stderr, getenv)
			if got := exitCode(err); got != exitUsage {
				t.Errorf("exit status %d, want %d (err %v)", got, exitUsage, err)
			}
			if !strings.Contains(stderr.String(), tc.name) {
				t.Errorf("stderr %q does not name %s", stderr.String(), tc.name)
			}
		})
	}
}

// TestConfigDefaultsAndValues: unset settings take their documented
// defaults and good values are read.
func TestConfigDefaultsAndValues(t *testing.T) {
	c, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if c.LeaseTTL != 0 || c.MCPRequireHuman || c.HTTPAddr != ":8080" || c.httpAddrSet || c.redisPrefixSet {
		t.Errorf("defaults: %+v", c)
	}
	env := map[string]string{"DLQBOT_LEASE_TTL": "30s", "DLQBOT_MCP_REQUIRE_HUMAN": "true",
		"REDIS_URL": "rediss://h:6380/1", "DLQBOT_HTTP_ADDR": "127.0.0.1:9000", "DLQBOT_REDIS_PREFIX": "x:",
		"AMQP_URL":                "amqp://u:p@n1:5672/vh, amqp://u:p@n2:5672/vh,amqp://u:p@n3:5672/vh",
		"RABBITMQ_MANAGEMENT_URL": "http://u:p@n1:15672,http://u:p@n2:15672,http://u:p@n3:15672"}
	c, err = loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("good values refused: %v", err)
	}
	if c.LeaseTTL != 30*time.Second || !c.MCPRequireHuman || c.HTTPAddr != "127.0.0.1:9000" || !c.httpAddrSet || !c.redisPrefixSet {
		t.Errorf("values: %+v", c)
	}
}

// TestCanaryDepthReachesTheEngine: DLQBOT_CANARY_DEPTH is the depth the
// engine's first step looks for failure classes; unset, the engine keeps
// its own default (engine.DefaultCanaryDepth).
func TestCanaryDepthReachesTheEngine(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
	}{{"", 0}, {"500", 500}, {"250000", 250000}} {
		t.Run("DLQBOT_CANARY_DEPTH="+tc.value, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string {
				if k == "DLQBOT_CANARY_DEPTH" {
					return tc.value
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			a, err := openApp(cfg, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if got := a.engineConfig(0).CanaryDepth; got != tc.want {
				t.Errorf("engine.Config.CanaryDepth %d, want %d", got, tc.want)
			}
		})
	}
}

// TestConfigBadValueTerminalJSON: the terminal front end reports a bad
// setting as its one JSON document on stdout, exit 2.
func TestConfigBadValueTerminalJSON(t *testing.T) {
	var stdout strings.Builder
	getenv := func(k string) string {
		if k == "DLQBOT_LEASE_TTL" {
			return "abc"
		}
		return ""
	}
	err := run(context.Background(), []string{"preview", "x.dlq", "--json"}, &stdout, &strings.Builder{}, getenv)
	if got := exitCode(err); got != exitUsage {
		t.Errorf("exit status %d, want %d", got, exitUsage)
	}
	var doc map[string]any
	if jerr := json.Unmarshal([]byte(stdout.String()), &doc); jerr != nil {
		t.Fatalf("stdout is not one JSON document: %q", stdout.String())
	}
	if msg, _ := doc["error"].(string); !strings.Contains(msg, "DLQBOT_LEASE_TTL") {
		t.Errorf("error %q does not name DLQBOT_LEASE_TTL", msg)
	}
}
