package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goFile matches a bare file name such as "runner.go" (not one inside
// a path such as "store/keys.go", which names another package's file).
var goFile = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])([a-z0-9_]+\.go)\b`)

func TestEveryDocNamesItsFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found %d packages under %s: is the module root there?", len(dirs), root)
	}
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		doc, err := os.ReadFile(filepath.Join(dir, "doc.go"))
		if err != nil {
			t.Errorf("%s has no doc.go naming its files", rel)
			continue
		}
		named := map[string]bool{}
		for _, m := range goFile.FindAllStringSubmatch(string(doc), -1) {
			named[m[1]] = true
		}
		for _, f := range files {
			if f != "doc.go" && !named[f] {
				t.Errorf("%s/doc.go does not name %s", rel, f)
			}
		}
		for f := range named {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil && !slices.Contains(files, f) {
				t.Errorf("%s/doc.go names %s, which is not in %s", rel, f, rel)
			}
		}
	}
}
