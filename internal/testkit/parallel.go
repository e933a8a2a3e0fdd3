package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// RequireParallel fails t for each top-level test in the _test.go files of
// dir that uses testkit (a broker or Redis) but does not call t.Parallel
// among its first three statements (after a skip, say): the testing package starts no parallel test of a package until
// every such test has ended, subtests and all, so one of them holds back
// the whole package (make test measured 167 s of that in the engine
// package). A test that must run alone says so in a comment containing
// "Not parallel" above it.
func RequireParallel(t *testing.T, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" || fn.Body == nil {
				continue
			}
			if fn.Doc != nil && strings.Contains(fn.Doc.Text(), "Not parallel") {
				continue
			}
			if !usesTestkit(fn.Body) || callsParallel(fn.Body.List[:min(3, len(fn.Body.List))]) {
				continue
			}
			t.Errorf("%s: %s uses the brokers or Redis but does not call t.Parallel() first: it holds back every parallel test of the package until it ends",
				fset.Position(fn.Pos()), fn.Name.Name)
		}
	}
}

// usesTestkit reports whether body names the testkit package or calls a
// helper whose name says it builds an environment (newEnv, newTapEnv…).
func usesTestkit(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "testkit" {
				found = true
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && strings.HasPrefix(id.Name, "new") && strings.Contains(id.Name, "Env") {
				found = true
			}
		}
		return !found
	})
	return found
}

// callsParallel reports whether one of stmts is the statement t.Parallel().
func callsParallel(stmts []ast.Stmt) bool {
	for _, s := range stmts {
		es, ok := s.(*ast.ExprStmt)
		if !ok {
			continue
		}
		call, ok := es.X.(*ast.CallExpr)
		if !ok {
			continue
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Parallel" {
			return true
		}
	}
	return false
}
