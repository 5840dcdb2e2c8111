// Package cpuprofile starts a CPU profile into a file for the command-line
// tools (limitload, limitsim), which profile themselves when asked to
// (--cpuprofile). One process has at most one CPU profile running
// (runtime/pprof's rule); Start returns its error otherwise.
package cpuprofile
