package bot

import (
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/commands"
)

// Defaults for Config.
const (
	DefaultCommandName  = commands.DefaultPrefix
	DefaultEditInterval = time.Second
	DefaultGroupsTTL    = time.Minute
	DefaultMaxBodyBytes = 1 << 20
	DefaultWorkTimeout  = 10 * time.Minute
	DefaultMaxInFlight  = 64
	DefaultMaxListRows  = 20000
)

// Config configures the bot. Zero values mean the documented defaults.
type Config struct {
	// SigningSecret verifies HTTP requests from Slack
	// (SLACK_SIGNING_SECRET). Without it Handler refuses every request.
	SigningSecret string
	// BotToken is the bot token, xoxb-… (SLACK_BOT_TOKEN); required.
	BotToken string
	// AppToken is the app-level token, xapp-… (SLACK_APP_TOKEN); it
	// enables RunSocketMode.
	AppToken string
	// APIURL is the Web API base URL (SLACK_API_URL); default
	// "https://slack.com/api/".
	APIURL string
	// ActivityChannel receives one line per lifecycle event
	// (DLQBOT_ACTIVITY_CHANNEL); "" posts none.
	ActivityChannel string
	// CommandName is the slash command's name, used in replies and help;
	// default "/dlq".
	CommandName string
	// TeamID, when set, is the only Slack workspace (team_id) whose
	// requests are served (DLQBOT_SLACK_TEAM_ID); a request from another
	// is refused and changes nothing. Checked on HTTP and Socket Mode
	// requests alike.
	TeamID string
	// AppID, when set, is the only Slack app (api_app_id) whose requests
	// are served (DLQBOT_SLACK_APP_ID).
	AppID string
	// EditInterval is the shortest time between two edits of one progress
	// message; default 1s (Slack's chat.update guidance).
	EditInterval time.Duration
	// GroupsTTL is how long a user's Slack user groups are cached; default
	// 1 minute.
	GroupsTTL time.Duration
	// MaxBodyBytes caps a request body; default 1 MiB.
	MaxBodyBytes int64
	// WorkTimeout bounds the slow work of one request (a preview scan, an
	// approval); default 10 minutes.
	WorkTimeout time.Duration
	// MaxInFlight is how many requests may be worked on at once; past it a
	// request is answered "busy, try again". Default 64.
	MaxInFlight int
	// MaxListRows caps the rows of the per-message list attached to a
	// preview as a file; default 20,000.
	MaxListRows int
	// HTTPClient makes the Web API and response_url calls; default a
	// client with a 30 s timeout.
	HTTPClient *http.Client
	// APIChannel is where previews and replays from the HTTP API and MCP
	// are posted when they have no Slack preview to thread under
	// (DLQBOT_API_CHANNEL); "" posts none (the activity channel still
	// shows them).
	APIChannel string
	// WorkspaceURL is the Slack workspace's address, https://acme.slack.com
	// (DLQBOT_SLACK_WORKSPACE_URL): activity and outcome lines link a
	// replay's thread with it; "" asks Slack for the thread's permalink.
	WorkspaceURL string
	// DashboardURL is the dashboard's base address (DLQBOT_DASHBOARD_URL):
	// activity and outcome lines link a replay's page under it; "" links
	// none.
	DashboardURL string
}

func (c Config) withDefaults() Config {
	if c.APIURL == "" {
		c.APIURL = slack.APIURL
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.CommandName == "" {
		c.CommandName = DefaultCommandName
	}
	if c.EditInterval <= 0 {
		c.EditInterval = DefaultEditInterval
	}
	if c.GroupsTTL <= 0 {
		c.GroupsTTL = DefaultGroupsTTL
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.WorkTimeout <= 0 {
		c.WorkTimeout = DefaultWorkTimeout
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxListRows <= 0 {
		c.MaxListRows = DefaultMaxListRows
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	return c
}
