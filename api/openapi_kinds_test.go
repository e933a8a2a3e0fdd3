package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOpenAPIKindsMatchEngine keeps the kind lists in api/openapi.yaml
// exactly equal to the typed constants the engine declares: every
// ChangeKind, ProblemKind and FailureKind constant is documented, and the
// document lists no kind the engine does not have.
func TestOpenAPIKindsMatchEngine(t *testing.T) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type kindEnum struct {
		Properties struct {
			Kind struct {
				Enum []string `yaml:"enum"`
			} `yaml:"kind"`
		} `yaml:"properties"`
	}
	type arrayOf struct {
		Items kindEnum `yaml:"items"`
	}
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Changes arrayOf `yaml:"changes"`
					} `yaml:"properties"`
				} `yaml:"Error"`
				Preview struct {
					Properties struct {
						Problems arrayOf `yaml:"problems"`
					} `yaml:"properties"`
				} `yaml:"Preview"`
				Replay struct {
					Properties struct {
						Failures arrayOf `yaml:"failures"`
					} `yaml:"properties"`
				} `yaml:"Replay"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	consts := engineConstants(t, "ChangeKind", "ProblemKind", "FailureKind")
	s := doc.Components.Schemas
	for _, c := range []struct {
		typ, where string
		enum       []string
	}{
		{"ChangeKind", "Error.changes[].kind", s.Error.Properties.Changes.Items.Properties.Kind.Enum},
		{"ProblemKind", "Preview.problems[].kind", s.Preview.Properties.Problems.Items.Properties.Kind.Enum},
		{"FailureKind", "Replay.failures[].kind", s.Replay.Properties.Failures.Items.Properties.Kind.Enum},
	} {
		want := consts[c.typ]
		if len(want) == 0 {
			t.Errorf("found no engine.%s constants", c.typ)
			continue
		}
		got := slices.Sorted(slices.Values(c.enum))
		if !slices.Equal(got, want) {
			t.Errorf("openapi.yaml %s lists %v; engine.%s constants are %v", c.where, got, c.typ, want)
		}
	}
}

// engineConstants returns, for each named type, the sorted values of the
// string constants declared with that type in package engine's sources.
func engineConstants(t *testing.T, types ...string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "engine", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok || !slices.Contains(types, id.Name) {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s: a %s constant is not a string literal", fset.Position(v.Pos()), id.Name)
					}
					val, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[id.Name] = append(out[id.Name], val)
				}
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}
