package nodetest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// Figures logs a scenario's figures in one line, "FIGURES scenario; key:
// value; ...", the line docs/faults.md quotes, and appends it to the file
// LIMITERD_FIGURES names, if any: go test shows a passing test's log only
// with -v, and make race prints that file at its end.
func Figures(t testing.TB, scenario string, kv ...any) {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "; %v: %v", kv[i], kv[i+1])
	}
	line := "FIGURES " + scenario + b.String()
	t.Log(line)
	if path := os.Getenv("LIMITERD_FIGURES"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil { // one write: appends of parallel tests do not mix
			t.Fatal(err)
		}
	}
}

// DerivedBound returns the most requests of one key that n nodes with
// limiterd's default counter and cluster settings, syncing every sync, may
// accept in a window (counter.BoundOf), and whether that is within the
// single node's L + floor(0.1 L): the bound a cluster's tests hold it to.
// edit changes the cluster settings first (say, coordination off: the
// bound of the budget's fallback).
func DerivedBound(t testing.TB, n int, limit int64, window, sync time.Duration, edit ...func(*counter.ClusterConfig)) (int64, bool) {
	t.Helper()
	cc := counter.DefaultClusterConfig("bound")
	cc.Nodes, cc.SyncInterval = n, sync
	for _, e := range edit {
		e(&cc)
	}
	if err := cc.Validate(); err != nil {
		t.Fatal(err)
	}
	b := counter.BoundOf(counter.DefaultConfig().Tolerance, cc, limit, window)
	return b.WorstCase, b.WorstCase <= b.Promised
}
