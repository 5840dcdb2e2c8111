//go:build race

package engine

// raceEnabled: built with -race, under which sync.Pool drops a share of
// what is put back, so a pooled wire is sometimes made anew.
const raceEnabled = true
