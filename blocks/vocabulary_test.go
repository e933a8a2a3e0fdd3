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
// (commands.Glossary): what people read says settled and came back, and
// nothing else, for them.
var bannedSynonyms = map[string]*regexp.Regexp{
	"settled":   regexp.MustCompile(`(?i)\bleft the target\b`),
	"came back": regexp.MustCompile(`(?i)\bdead-lettered again\b|\breturned\b`),
}

// What a person reads in Slack, on the dashboard and in the terminal's
// readable output uses one name for each quantity: the string literals of
// blocks/ and the terminal's printer, and the dashboard's templates (text
// outside tags and actions), hold none of the synonyms.
func TestOneVocabulary(t *testing.T) {
	var texts []struct{ where, text string }
	add := func(where, text string) { texts = append(texts, struct{ where, text string }{where, text}) }

	goFiles, _ := filepath.Glob("*.go")
	printers, _ := filepath.Glob("../cmd/dlqbot/print*.go")
	for _, f := range append(goFiles, printers...) {
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
	if len(templates) == 0 || len(printers) == 0 {
		t.Fatal("found no dashboard templates or terminal printer to read")
	}
	markup := regexp.MustCompile(`(?s)<[^>]*>|\{\{.*?\}\}`)
	for _, f := range templates {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(f, markup.ReplaceAllString(string(data), " "))
	}
	for _, x := range texts {
		for term, re := range bannedSynonyms {
			if m := re.FindString(x.text); m != "" {
				t.Errorf("%s: %q where the glossary's word is %q", x.where, m, term)
			}
		}
	}
}
