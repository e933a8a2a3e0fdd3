package doccheck

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/stroma/dlqbot/"

// productionImports returns, for each package of the module (by its path
// inside the module), the module's packages its production files import.
func productionImports(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	deps := map[string][]string{}
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
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		pkg = filepath.ToSlash(pkg)
		if _, ok := deps[pkg]; !ok {
			deps[pkg] = nil
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(deps[pkg], dep) {
				deps[pkg] = append(deps[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return deps
}

// reach returns every package pkg depends on, directly or not.
func reach(deps map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(string)
	walk = func(p string) {
		for _, d := range deps[p] {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				walk(d)
			}
		}
	}
	walk(pkg)
	return out
}

func under(pkg, floor string) bool { return pkg == floor || strings.HasPrefix(pkg, floor+"/") }

// TestLayers keeps the arrows one way: front ends → ops → engine ← store,
// engine/amqp. The engine's packages and the store depend on none of the
// layers above them, and no production package imports a test helper.
func TestLayers(t *testing.T) {
	deps := productionImports(t)
	above := []string{"ops", "commands", "api", "bot", "dashboard", "mcp", "client", "blocks", "metrics", "internal", "cmd"}
	testOnly := []string{"internal/legacytoken", "internal/testkit", "internal/clustertest", "internal/doccheck"}
	for pkg := range deps {
		if under(pkg, "engine") || under(pkg, "store") {
			for _, d := range reach(deps, pkg) {
				for _, a := range above {
					if under(d, a) {
						t.Errorf("%s depends on %s, a layer above it", pkg, d)
					}
				}
			}
		}
		for _, d := range deps[pkg] {
			for _, h := range testOnly {
				if under(d, h) && !under(pkg, h) && !under(pkg, "internal/clustertest") {
					t.Errorf("%s, a production package, imports the test helper %s", pkg, d)
				}
			}
		}
	}
}

// TestLetterIsALeaf keeps engine/letter, the reading of one dead letter, a
// leaf: its production files import the standard library only, so that it
// can be read, tested and fuzzed without the engine, and engine can import
// it without a cycle.
func TestLetterIsALeaf(t *testing.T) {
	dir := filepath.Join("..", "..", "engine", "letter")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		n++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				t.Errorf("engine/letter/%s imports %s: letter imports the standard library only", filepath.Base(path), p)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no production files in %s", dir)
	}
}

// TestEngineImportsOnlyLetter keeps package engine, the vocabulary, at the
// bottom of the engine's floors: of the module it imports engine/letter
// only (the vocabulary of one dead letter), so every other engine package
// can import it.
func TestEngineImportsOnlyLetter(t *testing.T) {
	importsOnly(t, "engine", "engine/letter")
}

// TestProofStandsAlone keeps engine/proof, the approval's proof, beside
// the run: of the module it imports the vocabulary (engine, engine/letter)
// only, never the services (engine/review, engine/replay) or an adapter.
func TestProofStandsAlone(t *testing.T) {
	importsOnly(t, "engine/proof", "engine", "engine/letter")
}

// importsOnly fails t when pkg's production files import a package of the
// module other than allowed.
func importsOnly(t *testing.T, pkg string, allowed ...string) {
	t.Helper()
	imports, ok := productionImports(t)[pkg]
	if !ok {
		t.Fatalf("no production files in %s", pkg)
	}
	for _, d := range imports {
		if !slices.Contains(allowed, d) {
			t.Errorf("%s imports %s: of the module it may import only %s", pkg, d, strings.Join(allowed, ", "))
		}
	}
}
