package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeT records failures instead of stopping the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }
func (f *fakeT) Fatal(...any)          { f.failed = true }

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.golden")
	f := &fakeT{TB: t}
	Check(f, path, []byte("a\n"), false)
	if !f.failed {
		t.Error("a missing golden file passed")
	}
	f = &fakeT{TB: t}
	Check(f, path, []byte("a\n"), true)
	if b, err := os.ReadFile(path); f.failed || err != nil || string(b) != "a\n" {
		t.Fatalf("update wrote %q, %v (failed %t)", b, err, f.failed)
	}
	for _, tc := range []struct {
		got  string
		fail bool
	}{{"a\n", false}, {"b\n", true}, {"a", true}} {
		f = &fakeT{TB: t}
		Check(f, path, []byte(tc.got), false)
		if f.failed != tc.fail {
			t.Errorf("%q against \"a\\n\": failed %t, want %t", tc.got, f.failed, tc.fail)
		}
	}
}
