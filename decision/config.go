package decision

import (
	"errors"
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
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Now: time.Now}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig. Every
// Config is valid today (a nil Now takes its default); Validate is here so
// that callers check a Decider's settings as they check every other part's,
// and so that the settings still to come (the deadline of a question to the
// key's coordinator node) have their place.
func (c Config) Validate() error {
	return nil
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = DefaultConfig().Now
	}
	return c
}
