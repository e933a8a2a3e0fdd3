package main

import (
	"fmt"
	"strconv"
	"time"
)

// config is everything dlqbot reads from its environment (SPEC §10). The
// names are relied on by other tools: keep them exactly.
type config struct {
	SlackBotToken      string // SLACK_BOT_TOKEN
	SlackSigningSecret string // SLACK_SIGNING_SECRET
	SlackAppToken      string // SLACK_APP_TOKEN (Socket Mode when set)
	SlackAPIURL        string // SLACK_API_URL (default Slack's)
	ActivityChannel    string // DLQBOT_ACTIVITY_CHANNEL
	HTTPAddr           string // DLQBOT_HTTP_ADDR (default :8080)
	PermissionsFile    string // DLQBOT_PERMISSIONS
	AMQPURL            string // AMQP_URL
	ManagementURL      string // RABBITMQ_MANAGEMENT_URL
	RedisURL           string // REDIS_URL
	RedisPrefix        string // DLQBOT_REDIS_PREFIX

	// Tuning beyond SPEC §10 (documented in the README).
	LeaseTTL       time.Duration // DLQBOT_LEASE_TTL (default 15s)
	ConnectionName string        // DLQBOT_CONNECTION_NAME (default "dlqbot"), shown in the management UI

	// HTTP API and MCP (README "HTTP API and MCP").
	APIChannel      string // DLQBOT_API_CHANNEL: where API/MCP previews and replays show in Slack
	MCPRequireHuman bool   // DLQBOT_MCP_REQUIRE_HUMAN: dlq_replay asks a person in Slack instead of starting
	MCPToken        string // DLQBOT_MCP_TOKEN: the principal `dlqbot mcp` (stdio) acts as
	DialectHeaders  string // DLQBOT_DIALECT_HEADERS: an in-house dialect (engine.ParseHeaderDialect)
}

// loadConfig reads the environment through getenv, applying the defaults.
func loadConfig(getenv func(string) string) config {
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
	}
	c.APIChannel = getenv("DLQBOT_API_CHANNEL")
	c.MCPRequireHuman, _ = strconv.ParseBool(getenv("DLQBOT_MCP_REQUIRE_HUMAN"))
	c.MCPToken = getenv("DLQBOT_MCP_TOKEN")
	if d, err := time.ParseDuration(getenv("DLQBOT_LEASE_TTL")); err == nil && d > 0 {
		c.LeaseTTL = d
	}
	return c
}

// Exit statuses (SPEC §10).
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
