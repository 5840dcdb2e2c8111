package peerbin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFindSkipsLaunchers: a wheel may install a Python launcher under the
// program's name beside the native executable; find returns the native
// one, and nothing when there is none.
func TestFindSkipsLaunchers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // path -> content, all executable
		want  string            // "" for an error
	}{
		{"launcher only", map[string]string{"bin/envoy": "#!/usr/bin/python3\n"}, ""},
		{"launcher and binary", map[string]string{"bin/envoy": "#!/usr/bin/python3\n", "envoy/_bin/envoy": "\x7fELF..."}, "envoy/_bin/envoy"},
		{"binary in bin", map[string]string{"bin/envoy": "\x7fELF..."}, "bin/envoy"},
		{"other name", map[string]string{"bin/caddy": "\x7fELF..."}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, content := range tc.files {
				full := filepath.Join(dir, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got, err := find(dir, "envoy")
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("found %s, want an error", got)
			case tc.want != "" && got != filepath.Join(dir, tc.want):
				t.Fatalf("found %q (%v), want %s", got, err, tc.want)
			}
		})
	}
}

// TestPathInstallsOnce installs the smallest of the wheels, runs it, and
// finds it again without pip the second time.
func TestPathInstallsOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cache := t.TempDir()
	w := Caddy()
	p, err := Path(ctx, cache, w)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, p, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "v"+w.Version) {
		t.Fatalf("%s version: %q, %v; want v%s", p, out, err, w.Version)
	}
	t.Setenv("PATH", "") // no python3: a second install would fail
	again, err := Path(ctx, cache, w)
	if err != nil || again != p {
		t.Fatalf("second Path: %q, %v; want %s from the cache", again, err, p)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 1 {
		t.Fatalf("cache holds %d entries, want the one install (no temporary left)", len(entries))
	}
}
