package decision

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidConfig is wrapped by every error from Config.Validate and by New
// for a missing dependency.
var ErrInvalidConfig = errors.New("decision: invalid config")

// Config configures a Decider. A zero field takes its default, so the zero
// value of Config is the same as DefaultConfig().
type Config struct {
	// Now is the clock requests are decided at, and the one the
	// once-a-second throttle of the internal-error log runs on. Default
	// time.Now; tests and simulations inject their own instants.
	Now func() time.Time
	// Coordinator, in a cluster, decides the checks at the margin that the
	// limiter leaves to the key's coordinator (limiter.Decision.Coordinate);
	// the Checker must then implement Completer. nil: such checks are
	// decided alone, with the budget (a single node never has them).
	Coordinator Coordinator
	// Deadline bounds the wait for the coordinator's answer; past it the
	// check is decided alone, with the per-node budget, and counted as a
	// fallback. Default 5ms: a round trip on a LAN is a fraction of that
	// (BENCHMARKS.md), and a check never waits longer. At most 1s.
	Deadline time.Duration
}

// DefaultDeadline is Config.Deadline's default.
const DefaultDeadline = 5 * time.Millisecond

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Now: time.Now, Deadline: DefaultDeadline}
}

// Validate reports every invalid field, each error wrapping
// ErrInvalidConfig. Zero fields are valid: they take their defaults.
func (c Config) Validate() error {
	var errs []error
	if c.Deadline < 0 || c.Deadline > time.Second {
		errs = append(errs, fmt.Errorf("%w: Deadline must be between 0 (the default, %v) and 1s, got %v", ErrInvalidConfig, DefaultDeadline, c.Deadline))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = DefaultConfig().Now
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	return c
}
