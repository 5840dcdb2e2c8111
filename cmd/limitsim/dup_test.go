package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/internal/burst"
)

// TestDupChangesNoDecisionShort is TestDupChangesNoDecision
// (dup_full_test.go) on 10 s of bursts, which the race detector runs too.
func TestDupChangesNoDecisionShort(t *testing.T) {
	checkDupChangesNoDecision(t, 10_000)
}

// checkDupChangesNoDecision: a second, late copy of every message is a
// no-op for the merge (counts are absolute, merged by max), so every
// decision on durationMs of random bursts is the same with it as without
// it, budget or not.
func checkDupChangesNoDecision(t *testing.T, durationMs int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	var trace []byte
	for i, at := range burst.RandomBursty(rng, durationMs) {
		trace = fmt.Appendf(trace, "%d k%d\n", at, i%3)
	}
	for _, args := range [][]string{
		{"--budget=false"},
		{"--budget-floor", "1", "--latency", "3ms"},
		{"--budget-floor", "2", "--stagger", "200ms", "--latency", "1ms"},
	} {
		base := append([]string{"replay", "--nodes", "8", "--decisions"}, args...)
		_, plain, _ := runCmd(t, string(trace), base...)
		code, dup, stderr := runCmd(t, string(trace), append(base, "--dup")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, code, stderr)
		}
		pd, _ := splitClusterOutput(t, plain)
		dd, ds := splitClusterOutput(t, dup)
		if !slices.Equal(pd, dd) {
			t.Errorf("%v: decisions differ with duplicated delivery", args)
		}
		if ds["rejected"] == "0" {
			t.Errorf("%v: nothing rejected; the trace should exceed the limit", args)
		}
	}
}
