package main

import "github.com/limiterd/limiterd/internal/seed"

// seedLCGSeed is the seed study's generator seed.
const seedLCGSeed = seed.LCGSeed

// newLCG returns the seed study's generator (package internal/seed).
func newLCG(s uint32) *seed.LCG { return seed.NewLCG(s) }
