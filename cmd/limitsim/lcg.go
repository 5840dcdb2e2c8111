package main

// seedLCGSeed is the seed's generator seed (hiz/dagitik.mjs, "tohum").
const seedLCGSeed = 20260730

// lcg is the seed's 32-bit linear congruential generator ("uretec"):
// s = s*1103515245 + 12345 mod 2^32, returning s / 2^32. The JavaScript
// computes Math.imul(s, 1103515245) + 12345 >>> 0, which is the same
// arithmetic mod 2^32 that uint32 wrap-around does here.
type lcg struct{ s uint32 }

func newLCG(seed uint32) *lcg { return &lcg{s: seed} }

// next advances the generator and returns s / 2^32 in [0, 1), exactly as
// the JavaScript's float64 division by 4294967296.
func (g *lcg) next() float64 {
	g.s = g.s*1103515245 + 12345
	return float64(g.s) / 4294967296
}

// node draws a node index in [0, n): floor(next() * n), the seed's
// Math.floor(rnd() * DUGUM).
func (g *lcg) node(n int) int {
	// The explicit conversion keeps the product a separately rounded float64
	// operation, as in JavaScript.
	return int(float64(g.next() * float64(n)))
}
