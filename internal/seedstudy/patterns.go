package seedstudy

import "github.com/limiterd/limiterd/internal/seed"

// A Pattern is one client's deterministic arrival pattern: the instants
// (ms, non-decreasing) of its requests.
type Pattern struct {
	Name string // as printed in the table header
	Desc string // how the requests are laid out, one line
	At   func() []int64
}

// Patterns returns the seed's three patterns (hiz/pencere.mjs, in its
// order) followed by the one limiterd adds, which breaks the seed's window.
func Patterns() []Pattern {
	return []Pattern{
		{
			Name: "steady 2x (20/s)",
			Desc: "one request every 50 ms for 180 s",
			At:   Steady2x,
		},
		{
			Name: "burst on both sides of a window edge",
			Desc: "at 60 s and 120 s: 600 spread over the 5 s before, 600 over the 5 s after",
			At:   EdgeBurst,
		},
		{
			Name: "intermittent, exactly at the limit",
			Desc: "at 0, 60 and 120 s: 600 spread over 5 s",
			At:   Intermittent,
		},
		{
			Name: "crowded at a slice end (not in the seed)",
			Desc: "600 in the last 100 ms of the 5 s slice [0, 5 s), 600 at 60 s and 600 at 120 s, each over 100 ms",
			At:   SliceEnd,
		},
	}
}

// Steady2x is the seed's "duzgun 2x": twice the limit rate, one request
// every 50 ms, 3,600 requests.
func Steady2x() []int64 { return seed.Steady[int64](Limit, WindowMs, 2, DurationMs) }

// EdgeBurst is the seed's "sinirda yigin": for each window edge at 60 s and
// 120 s, a full limit in the slice before it and another in the slice
// after, 2,400 requests.
func EdgeBurst() []int64 { return seed.EdgeBurst[int64](Limit, WindowMs) }

// Intermittent is the seed's "aralikli tam sinir": a full limit in the first
// 5 s of every minute, 1,800 requests.
func Intermittent() []int64 { return seed.Intermittent[int64](Limit, WindowMs) }

// sliceEndBurstMs is how long each burst of SliceEnd lasts.
const sliceEndBurstMs = 100

// SliceEnd is the pattern the seed's three never hit. A full limit arrives
// in the last 100 ms of the epoch-aligned slice [0, 5 s). The seed's window
// counts slices [d-11, d], so it forgets that slice at 60 s, when slice 12
// begins, although its requests are then only 55 s old: a second full limit
// at 60 s is let through and [4.9 s, 60.1 s) holds 2x the limit. The third
// burst, at 120 s, is where the seed has forgotten the second one. limiterd
// counts a slice until its own start is a full window old, so it rejects the
// second burst.
func SliceEnd() []int64 {
	var at []int64
	for _, start := range []int64{
		SliceMs - sliceEndBurstMs, // the end of slice 0
		Slices * SliceMs,          // the start of slice 12: slice 0 forgotten
		2 * Slices * SliceMs,      // the start of slice 24: slice 12 forgotten
	} {
		at = append(at, seed.Spread(start, sliceEndBurstMs, Limit)...)
	}
	return at
}
