package main

import (
	seedpkg "github.com/limiterd/limiterd/internal/seed"

	"math"
	"math/bits"
	"math/rand/v2"
	"time"
)

// An arrival is one scheduled request: its instant after the start of the
// run and the index of its key (always 0 for the single-key patterns).
type arrival struct {
	at  time.Duration
	key int32
}

// A schedule yields the arrivals of a run in non-decreasing order of at.
// It is a generator rather than a list so that the keys pattern at 40,000/s
// holds no schedule in memory; every schedule ends (at most Config.Duration
// of arrivals, and Validate bounds their number).
type schedule interface {
	next() (arrival, bool)
}

// newSchedule builds cfg's schedule. cfg must have passed Validate.
func newSchedule(cfg *Config) schedule {
	switch cfg.Pattern {
	case patternSteady:
		return &listSchedule{at: steadyTimes(cfg.Limit, cfg.Window, cfg.Factor, cfg.Duration)}
	case patternEdgeBurst:
		return &listSchedule{at: capTimes(edgeBurstTimes(cfg.Limit, cfg.Window), cfg.Duration)}
	case patternIntermittent:
		return &listSchedule{at: capTimes(intermittentTimes(cfg.Limit, cfg.Window), cfg.Duration)}
	case patternRandom:
		return newPoisson(cfg.Seed, cfg.Rate, cfg.Duration, nil)
	default: // patternKeys
		return newPoisson(cfg.Seed, cfg.Rate, cfg.Duration, newKeyPicker(cfg.Seed, cfg.Keys, cfg.ZipfS))
	}
}

// listSchedule is a precomputed single-key schedule.
type listSchedule struct {
	at []time.Duration
	i  int
}

func (s *listSchedule) next() (arrival, bool) {
	if s.i >= len(s.at) {
		return arrival{}, false
	}
	s.i++
	return arrival{at: s.at[s.i-1]}, true
}

// sliceOf is the seed's 5 s slice scaled: a twelfth of the window.
func sliceOf(window time.Duration) time.Duration { return window / 12 }

// steadyTimes is the seed's "steady at k x the limit": request i at
// i x window/(factor x limit), every instant before d. With the seed's
// 600 per 60 s, factor 2 and 180 s it is one request every 50 ms, 3,600
// requests.
func steadyTimes(limit int, window time.Duration, factor float64, d time.Duration) []time.Duration {
	step := float64(window) / (factor * float64(limit))
	n := int(math.Ceil(float64(d) / step))
	at := make([]time.Duration, 0, n)
	for i := range n {
		t := time.Duration(float64(i) * step)
		if t >= d {
			break
		}
		at = append(at, t)
	}
	return at
}

// spread returns n instants spread evenly over [start, start+span):
// request i at start + floor(i x span / n), the seed's layout of a burst.
// The product is taken in 128 bits, so any span and n are exact.
func spread(start, span time.Duration, n int) []time.Duration {
	at := make([]time.Duration, n)
	for i := range at {
		hi, lo := bits.Mul64(uint64(i), uint64(span))
		q, _ := bits.Div64(hi, lo, uint64(n)) // i < n, so q < span: no overflow
		at[i] = start + time.Duration(q)
	}
	return at
}

// edgeBurstTimes is the seed's "burst on both sides of a window edge": for
// each edge E at 1 and 2 windows, a full limit spread over the slice before
// E and another over the slice after it; 4 x limit requests, in order.
func edgeBurstTimes(limit int, window time.Duration) []time.Duration {
	s := sliceOf(window)
	var at []time.Duration
	for _, edge := range []time.Duration{window, 2 * window} {
		at = append(at, spread(edge-s, s, limit)...)
		at = append(at, spread(edge, s, limit)...)
	}
	return at // the four bursts do not overlap, so this is sorted
}

// intermittentTimes is the seed's "intermittent, exactly at the limit": a
// full limit spread over the first slice of each of three windows.
func intermittentTimes(limit int, window time.Duration) []time.Duration {
	s := sliceOf(window)
	var at []time.Duration
	for k := range 3 {
		at = append(at, spread(time.Duration(k)*window, s, limit)...)
	}
	return at
}

// capTimes drops the instants at or after d (an explicit --duration shorter
// than the pattern).
func capTimes(at []time.Duration, d time.Duration) []time.Duration {
	for i, t := range at {
		if t >= d {
			return at[:i]
		}
	}
	return at
}

// poisson is a Poisson process of rate per second until end, each arrival
// on the key keys picks (nil: key 0).
type poisson struct {
	rng  *rand.Rand
	rate float64
	end  time.Duration
	t    float64 // seconds
	keys *keyPicker
}

func newPoisson(seed uint64, rate float64, end time.Duration, keys *keyPicker) *poisson {
	return &poisson{rng: rand.New(rand.NewPCG(seed, 1)), rate: rate, end: end, keys: keys}
}

func (p *poisson) next() (arrival, bool) {
	p.t += p.rng.ExpFloat64() / p.rate
	ns := p.t * float64(time.Second)
	if ns >= float64(p.end) { // compared in float64: no overflow converting a huge t
		return arrival{}, false
	}
	a := arrival{at: time.Duration(ns)}
	if p.keys != nil {
		a.key = p.keys.pick()
	}
	return a, true
}

// keyPicker draws key indexes in [0, n): Zipf with exponent s (key k with
// probability proportional to 1/(k+1)^s, math/rand/v2's Zipf with v = 1),
// or uniform when s is 0. With s = 1.1 and 200,000 keys the hottest key
// takes 13 % of the traffic, the 100 hottest 56 %, the coldest half of the
// keys 2.8 % together; at 40,000/s, 296 keys send faster than 600 per
// 60 s: a few clients far over their limit, most far under it.
type keyPicker struct {
	rng  *rand.Rand
	zipf *rand.Zipf
	n    int
}

func newKeyPicker(seed uint64, n int, s float64) *keyPicker {
	rng := rand.New(rand.NewPCG(seed, 2))
	k := &keyPicker{rng: rng, n: n}
	if s != 0 && n > 1 {
		k.zipf = rand.NewZipf(rng, s, 1, uint64(n-1))
	}
	return k
}

func (k *keyPicker) pick() int32 {
	if k.zipf != nil {
		return int32(k.zipf.Uint64())
	}
	return int32(k.rng.IntN(k.n))
}

// A targetPicker chooses the target of each request, in schedule order.
type targetPicker interface {
	pick() int
}

func newTargetPicker(spread string, seed uint64, n int) targetPicker {
	switch spread {
	case spreadRoundRobin:
		return &roundRobin{n: n}
	case spreadLCG:
		return &lcgPicker{g: seedpkg.NewLCG(uint32(seed)), n: n}
	default:
		return &randomPicker{rng: rand.New(rand.NewPCG(seed, 3)), n: n}
	}
}

type roundRobin struct{ i, n int }

func (r *roundRobin) pick() int {
	i := r.i
	r.i = (r.i + 1) % r.n
	return i
}

type randomPicker struct {
	rng *rand.Rand
	n   int
}

func (r *randomPicker) pick() int { return r.rng.IntN(r.n) }

type lcgPicker struct {
	g *seedpkg.LCG // the seed study's generator
	n int
}

// pick is the seed's Math.floor(rnd() * DUGUM).
func (l *lcgPicker) pick() int { return l.g.Node(l.n) }
