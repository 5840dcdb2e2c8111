package limiter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad reads rule files side by side: one, several merged, and every
// file's problems in one error.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ours := write("ours.yaml", "rules:\n  - name: default\n    limit: 600\n    window: 60s\n")
	more := write("more.yaml", "rules:\n  - name: api\n    match: \"api:*\"\n    limit: 10\n    window: 1s\n")
	bad1 := write("bad1.yaml", "rules:\n  - name: x\n    limit: -1\n    window: 60s\n")
	bad2 := write("bad2.yaml", "rules:\n  - name: y\n    limit: 1\n    window: never\n")
	dup := write("dup.yaml", "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	envoy := envoyFile("readme/example1.yaml")
	for _, tt := range []struct {
		name  string
		paths []string
		rules string // names in order
		errs  []string
	}{
		{"one file", []string{ours}, "default", nil},
		{"two files", []string{more, ours}, "api default", nil},
		{"ours and Envoy's", []string{ours, envoy}, "default envoy:mongo_cps:mongo_cps.database_users envoy:mongo_cps:mongo_cps.database_default", nil},
		{"every bad file reported", []string{bad1, ours, bad2}, "", []string{bad1 + ":3", bad2 + ":4"}},
		{"merged sets checked as a whole", []string{ours, dup}, "", []string{`"default"`, dup}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := Load(tt.paths...)
			if tt.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, r := range rs.Rules {
					names = append(names, r.Name)
				}
				if got := strings.Join(names, " "); got != tt.rules {
					t.Errorf("rules %q, want %q", got, tt.rules)
				}
				return
			}
			if rs != nil || !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("Load = %v, %v; want ErrInvalidRules", rs, err)
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
	for _, paths := range [][]string{nil, {ours, filepath.Join(dir, "missing.yaml")}} {
		if _, err := Load(paths...); err == nil || errors.Is(err, ErrInvalidRules) || len(paths) > 0 && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Load(%q) = %v, want an error reading, not ErrInvalidRules", paths, err)
		}
	}
}

// TestReadFilesSum checks that the digest changes with a file's content
// and name, and with the files' order, and only then.
func TestReadFilesSum(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	sum := func(paths ...string) [32]byte {
		t.Helper()
		f, err := ReadFiles(paths...)
		if err != nil {
			t.Fatal(err)
		}
		return f.Sum
	}
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ab := sum(a, b)
	if sum(a, b) != ab {
		t.Error("the same files, another sum")
	}
	if sum(b, a) == ab || sum(a) == sum(b) {
		t.Error("other names or order, the same sum")
	}
	if err := os.WriteFile(b, []byte("y"), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum(a, b) == ab {
		t.Error("other content, the same sum")
	}
}
