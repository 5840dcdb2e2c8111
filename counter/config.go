package counter

import (
	"fmt"
	"math"
)

// Config configures a Counter. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Shards is the number of independently locked partitions of the key
	// space. A power of two; more shards mean less lock contention between
	// goroutines checking different keys. Default 64.
	Shards int
	// MaxKeys caps how many (limit, key) pairs are tracked at once, which caps
	// memory (about 120 bytes per pair at HS1 traffic, see BENCHMARKS.md).
	// At the cap a new key is allowed without being counted (see doc.go).
	// Default 1,000,000.
	MaxKeys int
	// Tolerance is the share of a limit by which a window-long interval may
	// exceed it (NFR1: 0.1 means at most 1.1 x the limit). It sets how many
	// requests a slice may hold after its first instant. Default 0.1.
	Tolerance float64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Shards: 64, MaxKeys: 1_000_000, Tolerance: 0.1}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.Shards < 1 || c.Shards > 1<<16 || c.Shards&(c.Shards-1) != 0:
		return fmt.Errorf("%w: Shards must be a power of two between 1 and 65536, got %d", ErrInvalidConfig, c.Shards)
	case c.MaxKeys < 1:
		return fmt.Errorf("%w: MaxKeys must be at least 1, got %d", ErrInvalidConfig, c.MaxKeys)
	case math.IsNaN(c.Tolerance) || c.Tolerance < 0 || c.Tolerance > 1:
		return fmt.Errorf("%w: Tolerance must be between 0 and 1, got %v", ErrInvalidConfig, c.Tolerance)
	}
	return nil
}
