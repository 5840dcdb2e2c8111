// Package seed holds what limiterd's tools take from the design study it
// started from (the seed documents, ../shared/seeds): its random number
// generator, so that a simulation and a load run draw the study's node
// choices exactly, and its arrival patterns, at any limit and window. One
// implementation, for cmd/limitsim and cmd/limitload.
//
// An LCG is not safe for concurrent use; its zero value is the generator
// seeded with 0.
package seed

// LCGSeed is the study's generator seed (hiz/dagitik.mjs, "tohum").
const LCGSeed = 20260730

// LCG is the study's 32-bit linear congruential generator ("uretec"):
// s = s*1103515245 + 12345 mod 2^32, returning s / 2^32. The JavaScript
// computes Math.imul(s, 1103515245) + 12345 >>> 0, which is the same
// arithmetic mod 2^32 that uint32 wrap-around does here.
type LCG struct{ s uint32 }

// NewLCG returns the generator seeded with s.
func NewLCG(s uint32) *LCG { return &LCG{s: s} }

// Next advances the generator and returns s / 2^32 in [0, 1), exactly as
// the JavaScript's float64 division by 4294967296.
func (g *LCG) Next() float64 {
	g.s = g.s*1103515245 + 12345
	return float64(g.s) / 4294967296
}

// Node draws a node index in [0, n): floor(Next() * n), the study's
// Math.floor(rnd() * DUGUM).
func (g *LCG) Node(n int) int {
	// The explicit conversion keeps the product a separately rounded float64
	// operation, as in JavaScript.
	return int(float64(g.Next() * float64(n)))
}

// State returns the generator's state, the last s.
func (g *LCG) State() uint32 { return g.s }
