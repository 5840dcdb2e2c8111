package counter

import (
	oracle2 "github.com/limiterd/limiterd/internal/oracle"

	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// oracle is the exact model: the list of accepted requests, each with its
// instant (ms) and hits, in order of arrival.
type oracle struct {
	at   []int64
	hits []int64
}

func (o *oracle) accept(t, h int64) { o.at, o.hits = append(o.at, t), append(o.hits, h) }

// inWindow returns the hits accepted in (t-w, t].
func (o *oracle) inWindow(t, w int64) int64 { return oracle2.InWindow(o.at, o.hits, t, w) }

// maxInAnyWindow returns the largest number of hits accepted in any
// interval [a, a+w).
func (o *oracle) maxInAnyWindow(w int64) int64 {
	n, _ := oracle2.MaxInWindow(o.at, o.hits, w)
	return n
}

// arrival is one request of a pattern.
type arrival struct{ t, hits int64 }

// params describe one limit for a property run.
type params struct {
	limit, windowMs int64
	slices          int
	tol             float64
}

func (p params) String() string {
	return fmt.Sprintf("L=%d W=%dms K=%d tol=%v", p.limit, p.windowMs, p.slices, p.tol)
}

// bound is the NFR1 bound the counter promises: L + floor(tol*L).
func (p params) bound() int64 { return p.limit + p.limit*int64(p.tol*1e6+0.5)/1e6 }

// runAgainstOracle feeds the arrivals (non-decreasing instants) to a fresh
// Counter and checks every decision against the oracle: NFR2 on each
// rejection, exact RetryAfter when asked, and NFR1 over the whole run. The
// probe function, when non-nil, may inject retry probes after a rejection.
func runAgainstOracle(tb testing.TB, p params, arrivals []arrival, probeRetry bool) (accepted, rejected int64, o *oracle) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Tolerance = p.tol
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	lim, err := c.Limit("p", p.limit, time.Duration(p.windowMs)*time.Millisecond, p.slices)
	if err != nil {
		tb.Fatal(err)
	}
	o = &oracle{}
	limits := []Limit{lim}
	var res [1]Result
	check := func(t, h int64) Decision {
		d, err := c.Allow(time.UnixMilli(t), "k", h, limits, res[:])
		if err != nil {
			tb.Fatalf("%v: Allow(%d, hits %d): %v", p, t, h, err)
		}
		inWin := o.inWindow(t, p.windowMs)
		if res[0].Count > inWin {
			tb.Fatalf("%v: at %d counted %d > %d really accepted in the window (over-count)", p, t, res[0].Count, inWin)
		}
		if d.Allowed {
			accepted += h
			o.accept(t, h)
		} else {
			rejected += h
			if inWin+h <= p.limit {
				tb.Fatalf("%v: at %d rejected %d hits with only %d accepted in the window (NFR2)", p, t, h, inWin)
			}
			if d.RetryAfter <= 0 {
				tb.Fatalf("%v: at %d rejected with RetryAfter %v", p, t, d.RetryAfter)
			}
		}
		return d
	}
	last := int64(0)
	for _, a := range arrivals {
		if a.t < last {
			continue // probes moved the clock past this arrival
		}
		last = a.t
		d := check(a.t, a.hits)
		if probeRetry && !d.Allowed {
			r := d.RetryAfter.Milliseconds()
			if r > 1 {
				if d2 := check(a.t+r-1, a.hits); d2.Allowed {
					tb.Fatalf("%v: rejected at %d with RetryAfter %dms but allowed at %d", p, a.t, r, a.t+r-1)
				}
			}
			if d3 := check(a.t+r, a.hits); !d3.Allowed {
				tb.Fatalf("%v: rejected at %d with RetryAfter %dms, still rejected then", p, a.t, r)
			}
			last = a.t + r
		}
	}
	if got := o.maxInAnyWindow(p.windowMs); got > p.bound() {
		tb.Fatalf("%v: %d accepted in one window-long interval > bound %d (NFR1)", p, got, p.bound())
	}
	return accepted, rejected, o
}

// patterns returns named arrival patterns for p, random and adversarial.
func patterns(p params, rng *rand.Rand) map[string][]arrival {
	w, sl := p.windowMs, p.windowMs/int64(p.slices)
	span := 4 * w
	out := map[string][]arrival{}

	// Uniform random arrivals at 1x..4x the limit rate, hits mostly 1.
	{
		n := int(p.limit) * (1 + rng.IntN(4)) * 4
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = rng.Int64N(span)
		}
		sortInt64(ts)
		var a []arrival
		for _, t := range ts {
			h := int64(1)
			if rng.IntN(10) == 0 {
				h = 1 + rng.Int64N(min(p.limit, 5))
			}
			a = append(a, arrival{t, h})
		}
		out["random"] = a
	}
	// Crowded at the end of every slice (breaks the seed's numbered slices).
	{
		var a []arrival
		for s := int64(0); s < span; s += sl {
			for i := int64(0); i < p.limit; i++ {
				a = append(a, arrival{s + sl - 1 - (p.limit-1-i)*min(sl-1, 3)/max(p.limit, 1), 1})
			}
		}
		sortArrivals(a)
		out["slice-end crowd"] = a
	}
	// Bursts on both sides of each window edge.
	{
		var a []arrival
		for e := w; e < span; e += w {
			for i := int64(0); i < p.limit; i++ {
				a = append(a, arrival{e - sl + i*sl/p.limit, 1}, arrival{e + i*sl/p.limit, 1})
			}
		}
		sortArrivals(a)
		out["edge bursts"] = a
	}
	// Greedy: a request every ms, always; tries every instant the limit
	// frees a unit.
	{
		var a []arrival
		step := max(int64(1), w/(8*p.limit))
		for t := int64(0); t < span; t += step {
			a = append(a, arrival{t, 1})
		}
		out["greedy"] = a
	}
	// Tail exploit: one request at a slice start, then bursts just before
	// each slice boundary, shifted so slice starts drift.
	{
		var a []arrival
		t := int64(0)
		for t < span {
			a = append(a, arrival{t, 1})
			burst := 1 + rng.Int64N(p.limit)
			at := t + sl - 1 - rng.Int64N(max(sl/4, 1))
			for i := int64(0); i < burst; i++ {
				a = append(a, arrival{at, 1})
			}
			t = at + 1 + rng.Int64N(max(w/3, 1))
		}
		out["tail exploit"] = a
	}
	// Intermittent at exactly the limit (the seed's third pattern, scaled).
	{
		var a []arrival
		for k := int64(0); k*w < span; k++ {
			for i := int64(0); i < p.limit; i++ {
				a = append(a, arrival{k*w + i*sl/p.limit, 1})
			}
		}
		out["intermittent"] = a
	}
	return out
}

func sortInt64(s []int64) { slices.Sort(s) }

func sortArrivals(a []arrival) {
	slices.SortStableFunc(a, func(x, y arrival) int { return cmp.Compare(x.t, y.t) })
}
