package burst

import (
	"math/rand/v2"
	"slices"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// CompliantPattern is a client that never exceeds its limit in any window.
type CompliantPattern struct {
	Name string
	At   []int64
}

// CompliantPatterns are clients at or under their limit in every window:
// steady ones, and a full limit at the start of every window, spread over
// 5 s (the seed's intermittent pattern), 1 s, one sync interval, or 1 ms.
func CompliantPatterns(durationMs int64) []CompliantPattern {
	return []CompliantPattern{
		{"steady 0.5x (5/s)", clustersim.SteadyAt(5, durationMs)},
		{"steady 0.9x (9/s)", clustersim.SteadyAt(9, durationMs)},
		{"steady 1.0x (10/s)", clustersim.SteadyAt(10, durationMs)},
		{"600 over 5 s a minute (seed)", burstsAt(seedstudy.Limit, seedstudy.WindowMs, seedstudy.SliceMs, durationMs)},
		{"600 over 1 s a minute", burstsAt(seedstudy.Limit, seedstudy.WindowMs, 1000, durationMs)},
		{"600 over 200 ms a minute", burstsAt(seedstudy.Limit, seedstudy.WindowMs, 200, durationMs)},
		{"600 at one instant a minute", burstsAt(seedstudy.Limit, seedstudy.WindowMs, 1, durationMs)},
	}
}

// burstsAt returns, at the start of every window in durationMs, limit
// requests spread evenly over spanMs (the seed's intermittent pattern has
// a span of one slice, 5 s). Each burst is exactly the limit, so the client
// never exceeds it in any window-long interval.
func burstsAt(limit int, windowMs, spanMs, durationMs int64) []int64 {
	var at []int64
	for start := int64(0); start < durationMs; start += windowMs {
		at = append(at, seed.Spread(start, spanMs, limit)...)
	}
	return at
}

// NodePattern is a client whose requests go to chosen nodes: request i
// at At[i] on node Nodes[i].
type NodePattern struct {
	Name  string
	At    []int64
	Nodes []int
}

// Node returns the pattern's node choice.
func (p NodePattern) Node() func(int) int { return func(i int) int { return p.Nodes[i] } }

// PostTickBurst was the budget's post-tick hole before the delivery grace:
// 600 requests at 0 ms and 600 more at 200 ms, the instant of the first
// tick, request i on node i mod 8. With any latency the second burst met
// nodes that had reset their budget but not yet heard the first burst.
func PostTickBurst() NodePattern {
	p := NodePattern{Name: "post-tick burst", At: make([]int64, 2*seedstudy.Limit), Nodes: make([]int, 2*seedstudy.Limit)}
	for i := range p.At {
		p.Nodes[i] = i % clustersim.DefaultConfig().Nodes
		if i >= seedstudy.Limit {
			p.At[i] = 200
		}
	}
	return p
}

// LatencyChain is the hole the delivery grace leaves for 0 < latency <
// grace (docs/blind-interval.md, "Latency"): nodes 0-3 fill their budget
// in one interval (100 requests each at 200 ms); nodes 4-7 fill theirs at
// 400 ms, right after the tick, before those messages arrive, so their
// shares ignore nodes 0-3's admissions; at 450 ms the grace is over and
// nodes 0-3 no longer count their previous interval, although nodes 4-7's
// admissions, which did not account for it, are not known to them yet.
// With tails hidden in expired slices on top (TailsThen) it is the worst
// case found for that latency.
func LatencyChain() NodePattern {
	p := NodePattern{Name: "latency chain"}
	for _, b := range []struct {
		at    int64
		nodes []int
	}{{200, []int{0, 1, 2, 3}}, {400, []int{4, 5, 6, 7}}, {450, []int{0, 1, 2, 3}}} {
		for _, n := range b.nodes {
			for range 100 {
				p.At, p.Nodes = append(p.At, b.at), append(p.Nodes, n)
			}
		}
	}
	return p
}

// AfterGrace is the hole latency above the delivery grace leaves: 100
// requests on every node at 0 ms and again at 250 ms, when the grace after
// the tick at 200 ms is over: a node then no longer counts its first burst
// as unacknowledged, and with more latency than the grace its peers have
// not merged it yet.
func AfterGrace() NodePattern {
	p := NodePattern{Name: "after the grace"}
	for _, at := range []int64{0, 250} {
		for n := range clustersim.DefaultConfig().Nodes {
			for range 100 {
				p.At, p.Nodes = append(p.At, at), append(p.Nodes, n)
			}
		}
	}
	return p
}

// NodeFlood is 100 requests on every node at 0 ms: more than any node's
// budget in one interval.
func NodeFlood(sc clustersim.Config) NodePattern {
	p := NodePattern{Name: "flood"}
	for n := range sc.Nodes {
		for range 100 {
			p.At, p.Nodes = append(p.At, 0), append(p.Nodes, n)
		}
	}
	return p
}

// TailsThen prefixes p with what makes the tail term of the bound real:
// every node opens a slice at 0 ms with one request and adds its tail T at
// 300 ms; p is shifted to start one window later, when those slices have
// expired and every node sees an empty window, but the tails still lie in
// the window [300 ms, 60.3 s) with everything p admits in its first 300 ms.
func TailsThen(sc clustersim.Config, p NodePattern) NodePattern {
	q := NodePattern{Name: p.Name + " after tails"}
	for n := range sc.Nodes {
		q.At, q.Nodes = append(q.At, 0), append(q.Nodes, n)
	}
	for n := range sc.Nodes {
		for range NodeTail(sc) {
			q.At, q.Nodes = append(q.At, 300), append(q.Nodes, n)
		}
	}
	shift := sc.Window.Milliseconds() - p.At[0]
	for i, at := range p.At {
		q.At, q.Nodes = append(q.At, at+shift), append(q.Nodes, p.Nodes[i])
	}
	return q
}

// RandomBursty is an adversarial client: bursts of up to 700 requests
// over up to 400 ms, a third of them starting exactly at a tick instant of
// the default 200 ms sync interval, for durationMs.
func RandomBursty(rng *rand.Rand, durationMs int64) []int64 {
	var at []int64
	var t0 int64
	for t0 < durationMs {
		t0 += rng.Int64N(3000)
		if rng.IntN(3) == 0 {
			t0 -= t0 % 200
		}
		at = append(at, seed.Spread(t0, 1+rng.Int64N(400), 1+rng.IntN(700))...)
	}
	slices.Sort(at)
	return at
}
