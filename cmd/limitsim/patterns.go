package main

import "github.com/limiterd/limiterd/internal/seed"

// A pattern is one client's deterministic arrival pattern: the instants
// (ms, non-decreasing) of its requests.
type pattern struct {
	name string // as printed in the table header
	desc string // how the requests are laid out, one line
	at   func() []int64
}

// seedPatterns returns the seed's three patterns (hiz/pencere.mjs, in its
// order) followed by the one limiterd adds, which breaks the seed's window.
func seedPatterns() []pattern {
	return []pattern{
		{
			name: "steady 2x (20/s)",
			desc: "one request every 50 ms for 180 s",
			at:   steady2x,
		},
		{
			name: "burst on both sides of a window edge",
			desc: "at 60 s and 120 s: 600 spread over the 5 s before, 600 over the 5 s after",
			at:   edgeBurst,
		},
		{
			name: "intermittent, exactly at the limit",
			desc: "at 0, 60 and 120 s: 600 spread over 5 s",
			at:   intermittent,
		},
		{
			name: "crowded at a slice end (not in the seed)",
			desc: "600 in the last 100 ms of the 5 s slice [0, 5 s), 600 at 60 s and 600 at 120 s, each over 100 ms",
			at:   sliceEnd,
		},
	}
}

// steady2x is the seed's "duzgun 2x": twice the limit rate, one request
// every 50 ms, 3,600 requests.
func steady2x() []int64 { return seed.Steady[int64](seedLimit, seedWindowMs, 2, seedDurationMs) }

// edgeBurst is the seed's "sinirda yigin": for each window edge at 60 s and
// 120 s, a full limit in the slice before it and another in the slice
// after, 2,400 requests.
func edgeBurst() []int64 { return seed.EdgeBurst[int64](seedLimit, seedWindowMs) }

// intermittent is the seed's "aralikli tam sinir": a full limit in the first
// 5 s of every minute, 1,800 requests.
func intermittent() []int64 { return seed.Intermittent[int64](seedLimit, seedWindowMs) }

// sliceEndBurstMs is how long each burst of sliceEnd lasts.
const sliceEndBurstMs = 100

// sliceEnd is the pattern the seed's three never hit. A full limit arrives in
// the last 100 ms of the epoch-aligned slice [0, 5 s). The seed's window
// counts slices [d-11, d], so it forgets that slice at 60 s, when slice 12
// begins, although its requests are then only 55 s old: a second full limit
// at 60 s is let through and [4.9 s, 60.1 s) holds 2x the limit. The third
// burst, at 120 s, is where the seed has forgotten the second one. limiterd
// counts a slice until its own start is a full window old, so it rejects the
// second burst.
func sliceEnd() []int64 {
	var at []int64
	for _, start := range []int64{
		seedSliceMs - sliceEndBurstMs, // the end of slice 0
		seedSlices * seedSliceMs,      // the start of slice 12: slice 0 forgotten
		2 * seedSlices * seedSliceMs,  // the start of slice 24: slice 12 forgotten
	} {
		at = append(at, seed.Spread(start, sliceEndBurstMs, seedLimit)...)
	}
	return at
}
