//go:build !linux

package clustersim

// ThreadCPU reports that per-thread CPU time is not available here: Times
// then holds only wall-clock times.
func ThreadCPU() (int64, bool) { return 0, false }
