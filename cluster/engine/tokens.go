package engine

import "time"

// tokens is a token bucket whose capacity and refill are given at each
// take, so that a configuration read at call time is the one in force.
// The zero value is a full bucket. Not safe for concurrent use: its owner
// locks it.
type tokens struct {
	used float64   // tokens taken and not yet refilled
	last time.Time // when used was last brought up to date
}

// take takes one token at now if one is left of capacity, refilled at
// capacity per every, and reports whether it did.
func (b *tokens) take(now time.Time, capacity float64, every time.Duration) bool {
	if !b.last.IsZero() && now.After(b.last) {
		b.used = max(0, b.used-capacity*float64(now.Sub(b.last))/float64(every))
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
	if b.used+1 > capacity {
		return false
	}
	b.used++
	return true
}
