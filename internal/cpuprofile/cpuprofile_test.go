package cpuprofile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStart(t *testing.T) {
	stop, err := Start("")
	if err != nil {
		t.Fatalf("empty path: %v", err)
	}
	stop()

	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err = Start(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(filepath.Join(t.TempDir(), "second.prof")); err == nil {
		t.Error("a second profile at once started; want an error")
	}
	stop()
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("profile file: %v, %v; want a non-empty file", fi, err)
	}
	if _, err := Start(filepath.Join(t.TempDir(), "no", "such", "dir", "p")); err == nil {
		t.Error("a profile into a missing directory started; want an error")
	}
}
