//go:build race

package main

// raceEnabled reports whether the tests run under the race detector, which
// slows the simulated cluster about 40-fold.
const raceEnabled = true
