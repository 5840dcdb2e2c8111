package nodetest

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond every 50 ms until it holds, and fails t once
// within has passed without it: a bound on waiting for an event, not a
// timing assertion. what names the event in the failure.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

// LockedBuffer is a bytes.Buffer that a process (or a server goroutine)
// writes while a test reads it. The zero value is empty and ready.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
