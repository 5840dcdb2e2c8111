package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineIsPure: the engine is a state machine with I/O at the edges.
// Its non-test files import neither memberlist nor the network, and never
// read the clock or start a timer: time is an argument of every call, as
// golang.org/x/time/rate's is, so a simulation drives the same engine as
// a node. A change that needs them belongs in package cluster.
func TestEngineIsPure(t *testing.T) {
	forbiddenImports := map[string]bool{
		"net": true, "net/http": true, "os": true, "os/exec": true,
		"github.com/hashicorp/memberlist":      true,
		"github.com/limiterd/limiterd/cluster": true,
	}
	clock := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImports[path] || strings.HasPrefix(path, "net/") {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && clock[sel.Sel.Name] {
				t.Errorf("%s: time.%s: the engine is told the time, it never reads it", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				t.Errorf("%s: a go statement: the engine starts no goroutine", fset.Position(g.Pos()))
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files: run from the package directory", checked)
	}
}
