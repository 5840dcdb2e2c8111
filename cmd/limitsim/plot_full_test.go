//go:build !race

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// docsImages is where the charts the README shows are committed.
var docsImages = filepath.Join("..", "..", "docs", "img")

// TestDocsImages runs "limitsim seed --plot DIR" as a user would and checks
// that the committed charts under docs/img are exactly what it writes
// (go test -update rewrites them), and that the tables on standard output
// are unchanged by the flag. Built without the race detector only: the
// client-rate chart simulates 4 million requests, which the detector slows
// about 40-fold; TestPlotsStructure and TestPlotGolden cover the same code
// with a smaller plan in both modes.
func TestDocsImages(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "", "seed", "--plot", dir)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	checkGolden(t, "seed.golden", []byte(stdout))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 6 {
		t.Errorf("wrote %d files, want 6", len(entries))
	}
	for _, e := range entries {
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, got)
		path := filepath.Join(docsImages, e.Name())
		if *update {
			if err := os.MkdirAll(docsImages, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (go test -update writes it)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what limitsim seed --plot writes (go test -update rewrites it)", path)
		}
	}
}
