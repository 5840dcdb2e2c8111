package main

import (
	"strings"
	"testing"
)

func TestSeedPlotUsage(t *testing.T) {
	code, _, stderr := runCmd(t, "", "seed", "--plot")
	if code != exitUsage || !strings.Contains(stderr, "flag needs an argument: -plot") {
		t.Errorf("seed --plot without DIR: exit %d, stderr %q", code, stderr)
	}
}
