package counter

import "time"

// Shares is how one key's tolerance is spent in a cluster, for a limit:
// what each node's slices may hide (Tail), what each node may admit that
// no other node knows of yet (Blind), and what the key's coordinator
// lends out as leases at most, all nodes together (Leases). See doc.go,
// "Coordination at the margin"; Bound adds them up.
type Shares struct {
	Tail, Blind, Leases int64
}

// Bound is the worst case of one limit: the most requests of one key that
// nodes counting with the same settings may accept in any window-long
// interval, and the parts it is made of. Every figure is a number of
// requests. BoundOf derives it; Counter.WorstCase is its WorstCase for the
// settings in force.
type Bound struct {
	// Promised is L + floor(Tolerance x L), what one node keeps (doc.go,
	// NFR1) and what 1 + Tolerance promises.
	Promised int64
	// Shares is how the tolerance is spent: on one node all of it is the
	// tail; Blind and Leases are 0 unless the coordinator decides at the
	// margin (ClusterConfig.Coordinated on more than one node).
	Shares
	// Floor is the budget's per-node floor f: BudgetFloor x what a client
	// at the limit's rate sends in a sync interval and its grace, rounded
	// up. Derived whether the budget is on or not; 0 on one node.
	Floor int64
	// Fallback is the bound of nodes that all decide alone: with the
	// budget, the most C + N x min(L − C, max(1, f + (L − C)/N)) can make
	// over the count C every node knew at the last tick, plus N x T
	// (L + N·f + N·T whenever f >= 1 and the limit is large against f·N;
	// L − 1 + N + N·T when f is 0); without it N x (L + T). With the
	// coordinator on it is the bound of the checks the budget decides
	// because no answer came in time. Of a routed limit
	// (ClusterConfig.Routing), whose count no node but the coordinator
	// knows, each node keeps to its floor: L + (N − 1)·max(1, f) + N·T.
	// Promised on one node.
	Fallback int64
	// WorstCase is the bound in force: Promised on one node; with the
	// coordinator deciding at the margin (a healthy cluster)
	// L + N·b + Λ + N·T, b the blind share and Λ the leases; else
	// Fallback.
	WorstCase int64
}

// BoundOf returns the worst case of a limit of limit requests per window
// for counters with the given Tolerance (Config) and cluster settings, as
// docs/blind-interval.md derives it for ticks at one instant and delivery
// within the grace. cc.Nodes <= 1 (a zero ClusterConfig included) is a
// single node; cc.Self is not read. BoundOf is pure: the Counter, the
// daemon's advice and the simulations all derive their bounds here.
//
// The slice count does not enter: however a window is sliced, the one
// slice that straddles its start hides at most the tail T, which the
// counter enforces per slice.
func BoundOf(tolerance float64, cc ClusterConfig, limit int64, window time.Duration) Bound {
	tolPPM := tolerancePPM(tolerance)
	if cc.Nodes <= 1 {
		return singleBound(limit, tolPPM)
	}
	return newClusterState(cc, tolPPM).bound(limit, window.Milliseconds(), tolPPM)
}

// singleBound is BoundOf on one node.
func singleBound(limit, tolPPM int64) Bound {
	t := limit * tolPPM / 1e6
	return Bound{Promised: limit + t, Shares: Shares{Tail: t}, Fallback: limit + t, WorstCase: limit + t}
}

// bound is BoundOf for the settings of cs.
func (cs *clusterState) bound(limit, windowMs, tolPPM int64) Bound {
	if cs.Nodes <= 1 {
		return singleBound(limit, tolPPM)
	}
	n := int64(cs.Nodes)
	b := Bound{Promised: singleBound(limit, tolPPM).Promised, Shares: cs.shares(limit, tolPPM)}
	b.Floor = cs.floor(limit, max(windowMs, 1))
	tails := n * b.Tail
	switch {
	case cs.Budget && cs.routed(limit, tolPPM):
		// No node knows the count: each keeps to its floor (withinBudget).
		b.Fallback = limit + (n-1)*min(limit, max(1, b.Floor)) + tails
	case cs.Budget:
		b.Fallback = budgetMost(limit, n, b.Floor) + tails
	default:
		b.Fallback = n*limit + tails
	}
	b.WorstCase = b.Fallback
	if cs.coordinated() {
		b.WorstCase = limit + n*b.Blind + b.Leases + tails
	}
	return b
}

// shares is Shares for a limit of limit with the settings of cs.
func (cs *clusterState) shares(limit, tolPPM int64) Shares {
	sh := Shares{Tail: cs.maxTail(limit, tolPPM)}
	if cs.coordinated() {
		sh.Blind, sh.Leases = cs.blind(limit, tolPPM), cs.leaseCap(limit, tolPPM)
	}
	return sh
}

// budgetMost is the most n nodes with the budget admit of a key with
// limit l, floor f, before their slices' tails: if every node knew a count
// C at the last tick, each admits after it at most
// min(l − C, max(1, f + (l − C)/n)) (its window's room, and its budget:
// the first request of an interval always fits), so the most is the
// largest C + n x that over C in [0, l).
//
// With r = l − C that is g(r) = l − r + n·min(r, max(1, f + ⌊r/n⌋)), for
// r in [1, l]. Where a node may fill the room alone, r <= max(1, f + ⌊r/n⌋)
// (r up to rFill), g = l + (n − 1)·r grows with r; past it
// g = l + n·f + n·⌊r/n⌋ − r, largest at rFill + 1 and at the multiples
// of n. So the maximum is at one of the few candidates below, which
// TestBudgetMost checks against every r.
func budgetMost(l, n, f int64) int64 {
	if l < 1 {
		return 0
	}
	g := func(r int64) int64 { return l - r + n*min(r, max(1, f+r/n)) }
	// The largest r with r − ⌊r/n⌋ <= f (at least 1, where max(1, …) is).
	rFill := max(1, f+f/(n-1))
	most := g(min(rFill, l))
	for _, r := range []int64{rFill + 1, (rFill/n + 1) * n} {
		if r <= l {
			most = max(most, g(r))
		}
	}
	return most
}

// Shares returns how the tolerance of a limit of max is spent with the
// current cluster settings (single node: all of it is the tail).
func (c *Counter) Shares(max int64) Shares {
	return c.bound(max, time.Millisecond).Shares
}

// WorstCase returns the most requests of one key that this Counter, with
// its current cluster settings, can accept in any interval of length window
// for a limit of max: Bound.WorstCase of BoundOf with its Tolerance and
// cluster settings. On a single node it is L + T (doc.go); in cluster mode
// L + N·b + Λ + N·T with coordination (b the blind share, Λ the leases;
// what a healthy cluster keeps, see doc.go), and without it the budget's
// bound, L + N·f + N·T for most limits (Bound.Fallback). Divided by max
// it is the ratio that 1 + Tolerance promises; with windows short against
// the sync interval, or limits small against the number of nodes, it
// exceeds it.
func (c *Counter) WorstCase(max int64, window time.Duration) int64 {
	return c.bound(max, window).WorstCase
}

// bound is BoundOf for this Counter's settings in force.
func (c *Counter) bound(limit int64, window time.Duration) Bound {
	cs := c.cluster.Load()
	if cs == nil {
		return singleBound(limit, c.tolPPM)
	}
	return cs.bound(limit, window.Milliseconds(), c.tolPPM)
}
