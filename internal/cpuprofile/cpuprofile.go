package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Start starts a CPU profile of this process into path and returns what
// stops it and closes the file. An empty path profiles nothing: stop is
// then a no-op.
func Start(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
