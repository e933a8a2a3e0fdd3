package doccheck

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stroma/dlqbot/commands"
)

var update = flag.Bool("update", false, "rewrite the README's glossary from commands.Glossary")

const (
	glossaryStart = "<!-- glossary: commands.Glossary; go test ./internal/doccheck -run '^TestReadmeGlossary$' -update rewrites it -->\n"
	glossaryEnd   = "<!-- /glossary -->\n"
)

// glossaryTable is commands.Glossary as the README's Markdown table.
func glossaryTable() string {
	var b strings.Builder
	b.WriteString("| Term | JSON field | Meaning |\n|---|---|---|\n")
	for _, g := range commands.Glossary {
		json := "—"
		if g.JSON != "" {
			json = "`" + g.JSON + "`"
		}
		b.WriteString("| " + g.Name + " | " + json + " | " + strings.ReplaceAll(g.Meaning, "|", `\|`) + " |\n")
	}
	return b.String()
}

// The README defines the vocabulary with commands.Glossary's words (the
// one definition `help glossary` prints), and no other Markdown file of
// the tree keeps a second table of it to drift.
func TestReadmeGlossary(t *testing.T) {
	root := filepath.Join("..", "..")
	path := filepath.Join(root, "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	before, rest, ok := strings.Cut(readme, glossaryStart)
	table, after, ok2 := strings.Cut(rest, glossaryEnd)
	if !ok || !ok2 {
		t.Fatalf("README.md has no glossary between %q and %q", glossaryStart, glossaryEnd)
	}
	if want := glossaryTable(); table != want {
		if *update {
			if err := os.WriteFile(path, []byte(before+glossaryStart+want+glossaryEnd+after), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("README.md's glossary differs from commands.Glossary (-update rewrites it)\n--- got\n%s--- want\n%s", table, want)
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if len(docs) == 0 {
		t.Fatal("found no docs/*.md")
	}
	for _, f := range docs {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range commands.Glossary {
			row := regexp.MustCompile(`(?m)^\|\s*\**` + regexp.QuoteMeta(g.Name) + `\**\s*\|`)
			if row.MatchString(string(data)) {
				t.Errorf("%s keeps a row of the glossary (%q): the README's table is the one copy", f, g.Name)
			}
		}
	}
}
