package engine

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIsSync sorts every message kind of the wire goldens: the sync
// messages (which a transport may merge on a goroutine of their own) from
// the ones waited on with a deadline.
func TestIsSync(t *testing.T) {
	sync := map[string]bool{"delta": true, "state": true, "heartbeat": true, "hello": true}
	paths, err := filepath.Glob(filepath.Join("testdata", "wire", "*.hex"))
	if err != nil || len(paths) < 20 {
		t.Fatalf("goldens: %d, %v", len(paths), err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".hex")
		kind, _, _ := strings.Cut(name, "_v")
		kind, _, _ = strings.Cut(kind, "_")
		b := undump(t, path)
		if got := IsSync(b); got != sync[kind] {
			t.Errorf("IsSync(%s, first byte %q) = %v, want %v", name, b[0], got, sync[kind])
		}
	}
	for _, b := range [][]byte{nil, {}, {'x'}, {0}} {
		if IsSync(b) {
			t.Errorf("IsSync(%q) = true", b)
		}
	}
}

// undump reads back the bytes of a hex.Dump file.
func undump(t *testing.T, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for line := range strings.Lines(string(text)) {
		cols, _, _ := strings.Cut(line, "|")
		fields := strings.Fields(cols)
		if len(fields) < 2 {
			continue
		}
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b...)
	}
	if len(out) == 0 {
		t.Fatalf("%s: empty", path)
	}
	return out
}
