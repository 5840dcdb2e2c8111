package scale

import (
	"errors"
	"fmt"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// ErrInvalidConfig wraps every invalid scale setting.
var ErrInvalidConfig = errors.New("scale: invalid scale run")

// Config is what limitsim scale --mesh runs.
type Config struct {
	Nodes []int // cluster sizes, one run each, 2 to 256
	Keys  int   // distinct keys of the background load (HS1)
	// Rate is the background load in checks per second, all nodes
	// together (HS2); PerNode, when positive, replaces it with PerNode x N.
	Rate, PerNode int64
	Seconds       int64         // measured model seconds, after the warm-up
	Warmup        time.Duration // model time before the measurement, a multiple of the sync interval
	Seed          uint32        // the LCG that draws keys and the accuracy clients' nodes
	// Cost measures node 0's live heap and the time spent in its Engine:
	// machine-dependent, so tests turn it off.
	Cost bool
}

// DefaultConfig is limitsim scale --mesh without flags: HS1 and HS2 on 8 to 128
// nodes, a window of warm-up, then 10 s measured.
func DefaultConfig() Config {
	return Config{
		Nodes: []int{8, 16, 32, 64, 128}, Keys: 200_000, Rate: 40_000,
		Seconds: 10, Warmup: seedstudy.WindowMs * time.Millisecond, Seed: seed.LCGSeed, Cost: true,
	}
}

// TotalRate is the background checks per second on n nodes.
func (c Config) TotalRate(n int) int64 {
	if c.PerNode > 0 {
		return c.PerNode * int64(n)
	}
	return c.Rate
}

// Validate returns every problem of c, each wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...))
	}
	sync := clustersim.DefaultConfig().Sync
	if len(c.Nodes) == 0 {
		bad("no cluster size given")
	}
	if c.Keys < 1 || c.Keys > 10_000_000 {
		bad("keys must be between 1 and 10000000, got %d", c.Keys)
	}
	if c.Rate < 1 || c.Rate > 10_000_000 {
		bad("rate must be between 1 and 10000000, got %d", c.Rate)
	}
	if c.PerNode < 0 || c.PerNode > 1_000_000 {
		bad("rate per node must be between 0 and 1000000, got %d", c.PerNode)
	}
	if c.Seconds < 1 || c.Seconds > 3600 {
		bad("seconds must be between 1 and 3600, got %d", c.Seconds)
	}
	if c.Warmup < 0 || c.Warmup > time.Hour || c.Warmup%sync != 0 {
		bad("warm-up must be a multiple of the sync interval (%v) between 0 and 1h, got %v", sync, c.Warmup)
	}
	for _, n := range c.Nodes {
		if n < 2 || n > 256 {
			bad("cluster sizes must be between 2 and 256, got %d", n)
			break
		}
	}
	return errors.Join(errs...)
}
