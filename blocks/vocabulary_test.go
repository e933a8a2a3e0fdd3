package blocks

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// bannedSynonyms are other names for the glossary's quantities
// (commands.Glossary): what people read says each term, and nothing else,
// for its quantity.
var bannedSynonyms = map[string]*regexp.Regexp{
	"sent":          regexp.MustCompile(`(?i)\bpublished\b|\breplayed messages?\b|\bof \S+ replayed\b`),
	"settled":       regexp.MustCompile(`(?i)\bleft the target\b|\bprocessed\b`),
	"came back":     regexp.MustCompile(`(?i)\bdead-lettered again\b|\breturned\b|\bfailed again\b|\bbounced\b`),
	"missing":       regexp.MustCompile(`(?i)\bdisappeared\b|\bvanished\b`),
	"in doubt":      regexp.MustCompile(`(?i)\buncertain\b|\bunconfirmed\b|\bmaybe sent\b|\bpending\b`),
	"not delivered": regexp.MustCompile(`(?i)\bundelivered\b|\bunroutable (?:message|cop(?:y|ies))|\bfailed to deliver\b`),
	"new failures":  regexp.MustCompile(`(?i)\bfresh failures?\b|\bunrelated failures?\b|\bother failures since\b`),
	"held":          regexp.MustCompile(`(?i)\bheld elsewhere\b|\blocked by\b|\bin use by\b|\bclaimed by another\b`),
}

// What a person reads in Slack, on the dashboard and in the terminal uses
// one name for each quantity: the string literals of blocks/, the Slack
// front end (bot/), the dashboard's Go, the terminal's printer, live line
// and sentences (cmd/dlqbot print*.go, live.go, human.go), the engine's
// words a replay's note and interrupted line carry to those screens
// (engine/words.go, replay/run_words.go, review/reaper.go), the dashboard's templates (text outside tags
// and actions) and the text its script writes hold none of the synonyms.
func TestOneVocabulary(t *testing.T) {
	var texts []struct{ where, text string }
	add := func(where, text string) { texts = append(texts, struct{ where, text string }{where, text}) }

	var goFiles []string
	for _, pattern := range []string{"*.go", "../bot/*.go", "../dashboard/*.go", "../cmd/dlqbot/print*.go", "../cmd/dlqbot/live.go", "../cmd/dlqbot/human.go",
		"../engine/words.go", "../engine/replay/run_words.go", "../engine/review/reaper.go"} {
		fs, _ := filepath.Glob(pattern)
		if len(fs) == 0 {
			t.Fatalf("found no %s to read", pattern)
		}
		goFiles = append(goFiles, fs...)
	}
	for _, f := range goFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fs := gotoken.NewFileSet()
		file, err := parser.ParseFile(fs, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					add(fs.Position(lit.Pos()).String(), s)
				}
			}
			return true
		})
	}
	templates, _ := filepath.Glob("../dashboard/templates/*")
	if len(templates) == 0 {
		t.Fatal("found no dashboard templates to read")
	}
	markup := regexp.MustCompile(`(?s)<[^>]*>|\{\{.*?\}\}`)
	for _, f := range templates {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(f, markup.ReplaceAllString(string(data), " "))
	}
	// The script's text for people: its double-quoted strings with a space
	// in them (element ids, classes and event names have none).
	script, err := os.ReadFile("../dashboard/static/dash.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`).FindAllString(string(script), -1) {
		if strings.Contains(s, " ") {
			add("dashboard/static/dash.js", s)
		}
	}
	for _, x := range texts {
		for term, re := range bannedSynonyms {
			if m := re.FindString(x.text); m != "" {
				t.Errorf("%s: %q where the glossary's word is %q", x.where, m, term)
			}
		}
	}
}
