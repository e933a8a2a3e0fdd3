package bot_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stroma/dlqbot/bot"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
)

// TestManifestMatchesTheBot checks that the app manifest creates what the
// bot serves and calls: /dlq on /slack/commands, interactivity on
// /slack/interactions, and the scopes of every Web API method it uses.
func TestManifestMatchesTheBot(t *testing.T) {
	data, err := os.ReadFile("../slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			SlashCommands []struct {
				Command string `yaml:"command"`
				URL     string `yaml:"url"`
			} `yaml:"slash_commands"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Interactivity struct {
				Enabled bool   `yaml:"is_enabled"`
				URL     string `yaml:"request_url"`
			} `yaml:"interactivity"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	cmds := m.Features.SlashCommands
	if len(cmds) != 1 || cmds[0].Command != bot.DefaultCommandName || !strings.HasSuffix(cmds[0].URL, slackstub.CommandsPath) {
		t.Errorf("slash commands %+v", cmds)
	}
	if i := m.Settings.Interactivity; !i.Enabled || !strings.HasSuffix(i.URL, slackstub.InteractionsPath) {
		t.Errorf("interactivity %+v", i)
	}
	for _, scope := range []string{"commands", "chat:write", "chat:write.public", "files:write", "im:write", "usergroups:read"} {
		if !slices.Contains(m.OAuth.Scopes.Bot, scope) {
			t.Errorf("scope %s missing", scope)
		}
	}
}
