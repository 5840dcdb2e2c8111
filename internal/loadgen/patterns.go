package loadgen

import (
	seedpkg "github.com/limiterd/limiterd/internal/seed"

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
	case PatternSteady:
		return &listSchedule{at: seedpkg.Steady(cfg.Limit, cfg.Window, cfg.Factor, cfg.Duration)}
	case PatternEdgeBurst:
		return &listSchedule{at: capTimes(seedpkg.EdgeBurst(cfg.Limit, cfg.Window), cfg.Duration)}
	case PatternIntermittent:
		return &listSchedule{at: capTimes(seedpkg.Intermittent(cfg.Limit, cfg.Window), cfg.Duration)}
	case PatternRandom:
		return newPoisson(cfg.Seed, cfg.Rate, cfg.Duration, nil)
	case PatternStreams:
		return newStreams(cfg)
	default: // PatternKeys
		return newPoisson(cfg.Seed, cfg.Rate, cfg.Duration, newKeyPicker(cfg.Seed, cfg.Keys, cfg.ZipfS))
	}
}

// streams merges the schedules of Config.Streams in time order (of two
// arrivals at the same instant, the earlier stream's first), each
// stream's keys numbered after the keys of the streams before it.
type streams struct {
	gens []schedule
	base []int32
	head []arrival // each generator's next arrival
	ok   []bool    // head holds one
}

func newStreams(cfg *Config) *streams {
	m := &streams{}
	base := int32(0)
	for i, st := range cfg.Streams {
		var keys *keyPicker
		if st.Keys > 1 {
			keys = newKeyPickerStream(cfg.Seed, uint64(2*i+101), st.Keys, st.ZipfS)
		}
		var g schedule
		if st.Poisson {
			p := newPoisson(cfg.Seed, st.Rate, cfg.Duration, keys)
			p.rng = rand.New(rand.NewPCG(cfg.Seed, uint64(2*i+100)))
			g = p
		} else {
			g = &steadyStream{rate: st.Rate, end: cfg.Duration, keys: keys}
		}
		m.gens = append(m.gens, g)
		m.base = append(m.base, base)
		base += int32(max(st.Keys, 1))
		a, ok := g.next()
		m.head, m.ok = append(m.head, a), append(m.ok, ok)
	}
	return m
}

func (m *streams) next() (arrival, bool) {
	best := -1
	for i, ok := range m.ok {
		if ok && (best < 0 || m.head[i].at < m.head[best].at) {
			best = i
		}
	}
	if best < 0 {
		return arrival{}, false
	}
	a := m.head[best]
	a.key += m.base[best]
	m.head[best], m.ok[best] = m.gens[best].next()
	return a, true
}

// steadyStream is rate arrivals a second, request k at k/rate, until end.
type steadyStream struct {
	rate float64
	end  time.Duration
	k    int64
	keys *keyPicker // nil: key 0
}

func (s *steadyStream) next() (arrival, bool) {
	ns := float64(s.k) / s.rate * float64(time.Second)
	if ns >= float64(s.end) {
		return arrival{}, false
	}
	s.k++
	a := arrival{at: time.Duration(ns)}
	if s.keys != nil {
		a.key = s.keys.pick()
	}
	return a, true
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
	return newKeyPickerStream(seed, 2, n, s)
}

// newKeyPickerStream is newKeyPicker drawing from the PCG stream stream.
func newKeyPickerStream(seed, stream uint64, n int, s float64) *keyPicker {
	rng := rand.New(rand.NewPCG(seed, stream))
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

// A targetPicker chooses the target of each request, in schedule order,
// given the index of its key and which targets take requests (up; nil:
// all): the one the spread picks, or the first after it that up takes
// (the picked one when up takes none).
type targetPicker interface {
	pick(key int32, up func(int) bool) int
}

// newTargetPicker picks among n targets the requests of keys keys.
func newTargetPicker(spread string, seed uint64, n, keys int) targetPicker {
	switch spread {
	case SpreadRoundRobin:
		return &roundRobin{n: n}
	case SpreadKeyRoundRobin:
		return &keyRoundRobin{next: make([]uint16, keys), n: n}
	case SpreadLCG:
		return &lcgPicker{g: seedpkg.NewLCG(uint32(seed)), n: n}
	default:
		return &randomPicker{rng: rand.New(rand.NewPCG(seed, 3)), n: n}
	}
}

type roundRobin struct{ i, n int }

func (r *roundRobin) pick(_ int32, up func(int) bool) int {
	i := r.i
	r.i = (r.i + 1) % r.n
	return available(i, r.n, up)
}

type randomPicker struct {
	rng *rand.Rand
	n   int
}

func (r *randomPicker) pick(_ int32, up func(int) bool) int {
	return available(r.rng.IntN(r.n), r.n, up)
}

type lcgPicker struct {
	g *seedpkg.LCG // the seed study's generator
	n int
}

// pick is the seed's Math.floor(rnd() * DUGUM).
func (l *lcgPicker) pick(_ int32, up func(int) bool) int {
	return available(l.g.Node(l.n), l.n, up)
}

// keyRoundRobin sends each key through the targets in turn, key k from
// target k mod n: a client that asks the next node each time, and after
// one it passed over for being down, the one after the node it asked.
type keyRoundRobin struct {
	next []uint16 // by key: the next target, less the key, mod n (n <= maxTargets)
	n    int
}

func (r *keyRoundRobin) pick(key int32, up func(int) bool) int {
	k := int(key) % r.n
	i := available((k+int(r.next[key]))%r.n, r.n, up)
	r.next[key] = uint16((i + 1 - k + r.n) % r.n)
	return i
}

// available is the first target from t on, of n, that up takes; t when
// up is nil or takes none.
func available(t, n int, up func(int) bool) int {
	if up == nil {
		return t
	}
	for i := range n {
		if u := (t + i) % n; up(u) {
			return u
		}
	}
	return t
}
