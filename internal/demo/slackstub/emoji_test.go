package slackstub

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every :emoji: shortcode the bot writes (blocks/, bot/) shows as an emoji
// on the stand-in's page, not as its raw shortcode.
func TestStandInRendersTheBotsEmoji(t *testing.T) {
	js, err := os.ReadFile("static/mrkdwn.js")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:^|[\s,{])"?([a-z0-9_+]+)"?: "`).FindAllStringSubmatch(string(js), -1) {
		known[m[1]] = true
	}
	var files []string
	for _, dir := range []string{"../../../blocks", "../../../bot"} {
		fs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		files = append(files, fs...)
	}
	if len(files) == 0 {
		t.Fatal("found none of the bot's sources")
	}
	code := regexp.MustCompile(`:([a-z][a-z0-9_]+[a-z]):`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range code.FindAllStringSubmatch(string(src), -1) {
			if notEmoji[m[1]] {
				continue
			}
			if !known[m[1]] {
				t.Errorf("%s writes :%s:, which the stand-in shows raw", f, m[1])
			}
		}
	}
}

// notEmoji are words the bot writes between colons that are not emoji
// shortcodes: the "Approve anyway" button's value, token:confirm:digest.
var notEmoji = map[string]bool{"confirm": true}
