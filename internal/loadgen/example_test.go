package loadgen_test

import (
	"fmt"
	"os"
	"time"

	"github.com/limiterd/limiterd/internal/loadgen"
)

// A schedule without sending it (limitload --dry-run): two clients, one
// at 2 checks a second and one at 1, for 1.5 s, spread round-robin over
// two targets.
func ExampleWriteSchedule() {
	cfg := loadgen.DefaultConfig()
	cfg.Targets = []string{"127.0.0.1:8081", "127.0.0.1:8082"}
	cfg.Pattern, cfg.Duration, cfg.Spread = loadgen.PatternStreams, 1500*time.Millisecond, loadgen.SpreadRoundRobin
	cfg.Streams = []loadgen.Stream{{Key: "fast", Rate: 2}, {Key: "slow", Rate: 1}}
	if err := cfg.Validate(nil); err != nil {
		fmt.Println(err)
		return
	}
	if err := loadgen.WriteSchedule(os.Stdout, &cfg, "r1"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// # limitload --dry-run: pattern streams, limit 600 per 1m0s, 2 target(s), spread round-robin, seed 20260730
	// 0 fast 0
	// 0 slow 1
	// 500 fast 0
	// 1000 fast 1
	// 1000 slow 0
}
