package nodecost

import "strconv"

// DemandWait is one demand class of a run's keys: how many checks they
// got and how many of those waited on the network. A key's demand is its
// checks over the run per limit's worth of the run (the limit times the
// run's windows): under 1 a client within its limit, 10 one sending ten
// times what it may.
//
// It tells who waits: a client within its limit waits mostly where a
// burst at one node passes that node's blind share, while a client far
// past its limit is at the margin the whole run, each unit of room its
// window gives back contested by every node (docs/hs2-waits.md).
type DemandWait struct {
	// Min and Max bound the class's demand: at least Min, below Max (0:
	// no upper end).
	Min float64 `json:"min"`
	Max float64 `json:"max,omitempty"`
	// Keys counts the keys of the class that got a check.
	Keys int64 `json:"keys"`
	// Checks counts their checks, Waited those that asked a coordinator
	// on another node. Waited counts checks, not asks: a lost ask sent
	// again is one check, which Row.NetworkWaitShare counts twice.
	Checks int64 `json:"checks"`
	Waited int64 `json:"waited"`
}

// Share is the class's share of checks that waited, 0 without checks.
func (d DemandWait) Share() float64 {
	if d.Checks == 0 {
		return 0
	}
	return float64(d.Waited) / float64(d.Checks)
}

// DemandClasses is the number of demand classes (Row.WaitByDemand).
const DemandClasses = 5

// demandEdges are the classes' lower ends: within the limit (below 0.9),
// about at it, up to twice it, up to ten times it, and beyond.
func demandEdges() [DemandClasses]float64 { return [DemandClasses]float64{0, 0.9, 1.1, 2, 10} }

// demandTally counts each key's checks and network waits, by rank.
type demandTally struct {
	checks, waited []int32
	asks           int // the simulation's asks sent so far (clustersim.Stats.Asks)
}

func newDemandTally(keys, asks int) *demandTally {
	return &demandTally{checks: make([]int32, keys), waited: make([]int32, keys), asks: asks}
}

// record counts a check of rank r, which waited if the simulation's asks,
// read after it, grew: only a check that asks another node sends one.
// Reading them only after a check the coordinator or the fallback decided
// is enough, as no other check sends an ask.
func (t *demandTally) record(r int, asks int) {
	t.checks[r]++
	if asks > t.asks {
		t.waited[r]++
		t.asks = asks
	}
}

// classes sums the keys into the demand classes, for limitsWorth checks
// per limit's worth of the run.
func (t *demandTally) classes(limitsWorth float64) [DemandClasses]DemandWait {
	edges := demandEdges()
	var out [DemandClasses]DemandWait
	for i, lo := range edges {
		out[i].Min = lo
		if i+1 < len(edges) {
			out[i].Max = edges[i+1]
		}
	}
	for r, n := range t.checks {
		if n == 0 {
			continue
		}
		demand := float64(n) / limitsWorth
		i := len(edges) - 1
		for i > 0 && demand < edges[i] {
			i--
		}
		out[i].Keys++
		out[i].Checks += int64(n)
		out[i].Waited += int64(t.waited[r])
	}
	return out
}

// label names a class for the table: "<0.9x", "0.9-1.1x", ">=10x".
func (d DemandWait) label() string {
	switch {
	case d.Min == 0:
		return "<" + num(d.Max) + "x"
	case d.Max == 0:
		return ">=" + num(d.Min) + "x"
	}
	return num(d.Min) + "-" + num(d.Max) + "x"
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
