package main

import (
	"testing"
)

func TestSeedGolden(t *testing.T) {
	code, stdout, stderr := runCmd(t, "", "seed")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	checkGolden(t, "seed.golden", []byte(stdout))
}
