package replay_test

import (
	"log"
	"os"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/replay"
)

// A trace of five requests against a limit of 2 per second on one node.
func Example() {
	cfg := replay.DefaultConfig()
	cfg.Limit, cfg.Window, cfg.Slices, cfg.Decisions = 2, time.Second, 4, true
	rp, err := replay.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	trace := "0 alice\n10 alice\n20 alice\n500 bob\n1000 alice\n"
	sum, err := rp.Run(strings.NewReader(trace), os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if err := replay.WriteSummary(os.Stdout, cfg, sum); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 0 alice allow
	// 10 alice allow
	// 20 alice deny
	// 500 bob allow
	// 1000 alice allow
	// # requests 5
	// # accepted 4
	// # rejected 1
	// # untracked 0
	// # keys 2
	// # limit 2
	// # window_ms 1000
	// # slices 4
	// # max_in_window 2
	// # max_in_window_key alice
	// # max_in_window_ratio 1.000
}
