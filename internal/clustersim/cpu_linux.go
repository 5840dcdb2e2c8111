//go:build linux

package clustersim

import (
	"syscall"
	"unsafe"
)

// clockThreadCPUTime is CLOCK_THREAD_CPUTIME_ID (linux/time.h), which
// package syscall does not name.
const clockThreadCPUTime = 3

// ThreadCPU returns the CPU time the calling OS thread has used, in ns,
// from clock_gettime(CLOCK_THREAD_CPUTIME_ID): precise to the nanosecond,
// where getrusage(RUSAGE_THREAD) is only as fine as the scheduler tick.
// The caller must be locked to its thread (runtime.LockOSThread) for two
// readings to be comparable.
func ThreadCPU() (int64, bool) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
