//go:build !linux

package main

// threadCPU reports that per-thread CPU time is not available here; limitsim
// scale then prints only wall-clock times.
func threadCPU() (int64, bool) { return 0, false }
