//go:build !race

package engine

// raceEnabled: built with -race (see race_test.go).
const raceEnabled = false
