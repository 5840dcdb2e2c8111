package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/limiterd/limiterd"

// pkg is one package directory of the module: its files' imports, and
// the parsed non-test files for the purity checks.
type pkg struct {
	path        string
	imports     map[string]token.Position // non-test files
	testImports map[string]token.Position // _test.go files
	files       []*ast.File               // non-test files
}

// rule is one import rule: the packages it governs, and for an import
// of theirs why it must not exist ("" when it may).
type rule struct {
	name    string
	governs func(p string) bool
	forbid  func(imp string) string
	pure    bool // no clock reads, no go statement
	tests   bool // test files too
}

func is(paths ...string) func(string) bool {
	return func(p string) bool {
		for _, q := range paths {
			if p == module+"/"+q {
				return true
			}
		}
		return false
	}
}

func under(dir string) func(string) bool {
	return func(p string) bool { return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/") }
}

func ours(imp string) bool { return imp == module || strings.HasPrefix(imp, module+"/") }

func network(imp string) bool { return imp == "net" || strings.HasPrefix(imp, "net/") }

func rules() []rule {
	return []rule{
		{
			name:    "counter is the pure core",
			governs: is("counter"),
			pure:    true,
			forbid: func(imp string) string {
				switch {
				case ours(imp):
					return "counter imports nothing of this module"
				case network(imp), imp == "os", strings.HasPrefix(imp, "os/"), imp == "syscall",
					imp == "log", strings.HasPrefix(imp, "log/"), strings.HasPrefix(imp, "github.com/"):
					return "counter imports no network, operating-system, logging, metrics or third-party package"
				}
				return ""
			},
		},
		{
			name:    "limiter decides as counter counts, purely",
			governs: is("limiter", "limiter/envoyrules"),
			pure:    true,
			forbid: func(imp string) string {
				switch {
				case network(imp), strings.HasPrefix(imp, "github.com/prometheus/"), strings.HasPrefix(imp, "github.com/hashicorp/"),
					under("cluster")(imp), under("decision")(imp):
					return "limiter imports no network, metrics, cluster or decision package"
				}
				return ""
			},
		},
		{
			name:    "the engine is a state machine",
			governs: is("cluster/engine"),
			pure:    true,
			forbid: func(imp string) string {
				switch {
				case network(imp), imp == "os", strings.HasPrefix(imp, "os/"), strings.HasPrefix(imp, "github.com/hashicorp/memberlist"),
					imp == module+"/cluster":
					return "the engine imports neither memberlist, the network, the operating system nor its adapter"
				}
				return ""
			},
		},
		{
			name:    "frontends decide through decision",
			governs: is("httpapi", "rls"),
			forbid: func(imp string) string {
				if imp == module+"/counter" || under("cluster")(imp) {
					return "a frontend imports neither counter nor cluster"
				}
				return ""
			},
		},
		{
			name:    "the oracle shares nothing with what it judges",
			governs: under("internal/oracle"),
			forbid: func(imp string) string {
				if ours(imp) {
					return "internal/oracle imports nothing of this module"
				}
				return ""
			},
		},
		{
			name: "the client library builds no server",
			// client/local is the in-process backend, built on the limiter
			// on purpose; its own package keeps the server out of the others.
			governs: func(p string) bool {
				return under("client")(p) && !under("client/internal")(p) && !under("client/local")(p)
			},
			forbid: func(imp string) string {
				if ours(imp) && !under("client")(imp) {
					return "the client library imports nothing of the server"
				}
				return ""
			},
		},
		{
			name:    "nothing imports a command",
			governs: func(string) bool { return true },
			tests:   true,
			forbid: func(imp string) string {
				if under("cmd")(imp) {
					return "a main package is flags, wiring and output; what others need belongs in a package"
				}
				return ""
			},
		},
	}
}

// clockReads are the functions of package time that read the clock or wait.
func clockReads(name string) bool {
	switch name {
	case "Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker":
		return true
	}
	return false
}

func TestImportRules(t *testing.T) {
	fset := token.NewFileSet()
	pkgs := load(t, fset)
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages: is the module root where go.mod says?", len(pkgs))
	}
	for _, r := range rules() {
		governed := 0
		for _, p := range pkgs {
			if !r.governs(p.path) {
				continue
			}
			governed++
			check := func(imps map[string]token.Position) {
				for imp, pos := range imps {
					if why := r.forbid(imp); why != "" {
						t.Errorf("%s: %s imports %s (%s: %s)", pos, p.path, imp, r.name, why)
					}
				}
			}
			check(p.imports)
			if r.tests {
				check(p.testImports)
			}
			if r.pure {
				checkPure(t, fset, r.name, p)
			}
		}
		if governed == 0 {
			t.Errorf("rule %q governs no package: a package was renamed and the rule went stale", r.name)
		}
	}
}

// checkPure reports clock reads and go statements in p's non-test files.
// A function named ...Now is the one exception: a documented shorthand
// for its sibling called with time.Now(), as x/time/rate's Allow is for
// AllowN.
func checkPure(t *testing.T, fset *token.FileSet, rule string, p *pkg) {
	t.Helper()
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				return !strings.HasSuffix(n.Name.Name, "Now")
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && clockReads(n.Sel.Name) {
					t.Errorf("%s: time.%s in %s (%s: time is an argument, never read inside)", fset.Position(n.Pos()), n.Sel.Name, p.path, rule)
				}
			case *ast.GoStmt:
				t.Errorf("%s: a go statement in %s (%s: it starts no goroutine)", fset.Position(n.Pos()), p.path, rule)
			}
			return true
		})
	}
}

// load parses every package directory of the module (not nested modules,
// testdata or hidden directories).
func load(t *testing.T, files *token.FileSet) map[string]*pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module "+module+"\n") {
		t.Fatalf("%s is not the module root (%v)", root, err)
	}
	pkgs := map[string]*pkg{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		ip := path.Join(module, filepath.ToSlash(rel))
		if rel == "." {
			ip = module
		}
		pk := pkgs[ip]
		if pk == nil {
			pk = &pkg{path: ip, imports: map[string]token.Position{}, testImports: map[string]token.Position{}}
			pkgs[ip] = pk
		}
		test := strings.HasSuffix(p, "_test.go")
		mode := parser.ImportsOnly
		if !test {
			mode = 0
		}
		f, err := parser.ParseFile(files, p, nil, mode|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if test {
				pk.testImports[path] = files.Position(imp.Pos())
			} else {
				pk.imports[path] = files.Position(imp.Pos())
			}
		}
		if !test {
			pk.files = append(pk.files, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
