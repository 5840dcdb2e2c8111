package seedstudy

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// The seed's distributed model (hiz/dagitik.mjs): one client, one 60 s
// window, HS3 and HS4.
const (
	DistNodes    = 8  // DUGUM (HS4)
	DistWindowS  = 60 // PENCERE, in seconds
	distSyncSeed = 0.2
)

// Scheme is one of the seed's three ways to count across nodes.
type Scheme int

// The seed's schemes.
const (
	SchemeCentral Scheme = iota // "merkezi": every request touches one shared counter
	SchemeSplit                 // "bolunmus kota": each node enforces limit/N alone
	SchemeDelayed               // "gecikmeli esitleme": local counts merged every interval
)

func (s Scheme) String() string {
	switch s {
	case SchemeCentral:
		return "central counter"
	case SchemeSplit:
		return fmt.Sprintf("quota split %d/%d per node", Limit, DistNodes)
	default:
		return "delayed sync"
	}
}

// DistResult is one run of a distributed scheme.
type DistResult struct {
	Requests, Accepted, Rejected int
	Over                         int // accepted beyond the limit (all requests lie in one window)
	FalseRejections              int
	Touches                      int // counter touches: writes to the shared view
}

// SeedDistributed is the seed's kos({duzen, hiz, aralik, tohum}) operation
// for operation: request i at t = i/rate seconds (float64), its node drawn
// by the LCG for every scheme, the delayed scheme syncing before a request
// when t - lastSync >= interval (float64). False rejections are the seed's:
// every rejection when the client sends at most the limit, else none.
func SeedDistributed(scheme Scheme, rate int, interval float64, s uint32) DistResult {
	rnd := seed.NewLCG(s)
	n := rate * DistWindowS
	local := make([]int, DistNodes)
	var global, lastGlobal, accepted, rejected, touches int
	lastSync := 0.0
	for i := range n {
		t := float64(i) / float64(rate)
		d := rnd.Node(DistNodes)
		if scheme == SchemeDelayed && t-lastSync >= interval {
			lastGlobal, lastSync = global, t
			clear(local)
		}
		var ok bool
		switch scheme {
		case SchemeCentral:
			touches++
			ok = global < Limit
		case SchemeSplit:
			ok = float64(local[d]) < float64(Limit)/DistNodes
		default:
			ok = lastGlobal+local[d] < Limit
		}
		if ok {
			accepted++
			global++
			local[d]++
		} else {
			rejected++
		}
	}
	if scheme == SchemeDelayed {
		touches = DistNodes * int(math.Floor(float64(DistWindowS)/interval))
	}
	r := DistResult{Requests: n, Accepted: accepted, Rejected: rejected, Touches: touches, Over: max(0, accepted-Limit)}
	if n <= Limit {
		r.FalseRejections = rejected
	}
	return r
}

// LimiterdDistributed runs the same client on a simulated cluster of
// limiterd nodes: request i at floor(i*1000/rate) ms (the counter's clock
// has 1 ms resolution), at the node the same LCG draws. Touches are the
// delta messages the nodes' Engines produced (one per node and sync
// interval with changes, each sent to every peer); false rejections are
// rejections while fewer than the limit were accepted in the window before.
func LimiterdDistributed(sc clustersim.Config, rate int, s uint32) (DistResult, error) {
	sim, err := clustersim.New(sc)
	if err != nil {
		return DistResult{}, err
	}
	rnd := seed.NewLCG(s)
	ty := clustersim.NewTally(sc.Window.Milliseconds(), sc.Limit)
	n := rate * DistWindowS
	var d limiter.Decision
	for i := range n {
		at := int64(i) * 1000 / int64(rate)
		if err := sim.Check(at, limiterdKey, rnd.Node(sc.Nodes), 1, &d); err != nil {
			return DistResult{}, err
		}
		ty.Record(at, limiterdKey, d.Allowed, d.Untracked)
	}
	st, err := sim.Finish()
	if err != nil {
		return DistResult{}, err
	}
	return DistResult{
		Requests: n, Accepted: ty.Accepted, Rejected: ty.Rejected,
		Over: max(0, ty.Accepted-int(sc.Limit)), FalseRejections: ty.FalseRejections, Touches: st.Produced,
	}, nil
}

// DistRow is one row of a distributed table.
type DistRow struct {
	Name     string
	Interval float64 // seconds
	R        DistResult
}

// LimiterdSim is the seed's cluster with limiterd's settings (the budget's
// design, without the coordinator), a sync interval in seconds and the
// budget on or off.
func LimiterdSim(interval float64, budget bool) clustersim.Config {
	sc := clustersim.BudgetConfig()
	sc.Sync = time.Duration(math.Round(interval*1000)) * time.Millisecond
	sc.Budget = budget
	return sc
}

// DistTables computes the seed's two distributed tables with limiterd's
// rows added: per client rate (10/s and 90/s) the three schemes at 0.2 s,
// then the delayed sync at 90/s over four intervals.
func DistTables() (byRate map[int][]DistRow, byInterval []DistRow, err error) {
	byRate = make(map[int][]DistRow)
	for _, rate := range []int{10, 90} {
		for _, s := range []Scheme{SchemeCentral, SchemeSplit, SchemeDelayed} {
			name := s.String()
			if s == SchemeDelayed {
				name += " (0.2 s)"
			}
			byRate[rate] = append(byRate[rate], DistRow{name, distSyncSeed, SeedDistributed(s, rate, distSyncSeed, seed.LCGSeed)})
		}
		for _, budget := range []bool{true, false} {
			r, err := LimiterdDistributed(LimiterdSim(distSyncSeed, budget), rate, seed.LCGSeed)
			if err != nil {
				return nil, nil, err
			}
			byRate[rate] = append(byRate[rate], DistRow{limiterdName(budget), distSyncSeed, r})
		}
	}
	for _, iv := range []float64{0.2, 1, 2, 5} {
		byInterval = append(byInterval, DistRow{"delayed sync", iv, SeedDistributed(SchemeDelayed, 90, iv, seed.LCGSeed)})
		for _, budget := range []bool{true, false} {
			r, err := LimiterdDistributed(LimiterdSim(iv, budget), 90, seed.LCGSeed)
			if err != nil {
				return nil, nil, err
			}
			byInterval = append(byInterval, DistRow{limiterdName(budget), iv, r})
		}
	}
	return byRate, byInterval, nil
}

func limiterdName(budget bool) string {
	if budget {
		return "limiterd, budget"
	}
	return "limiterd, no budget"
}

// WriteDistTables prints the tables after the window table of limitsim
// seed.
func WriteDistTables(w io.Writer, byRate map[int][]DistRow, byInterval []DistRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\ndistributed counting (hiz/dagitik.mjs): %d nodes, one %d s window, limit %d, request i at i/rate s\n",
		DistNodes, DistWindowS, Limit)
	fmt.Fprintf(bw, "on the node drawn by the seed's LCG (seed %d); limiterd rows run the real counter, limiter and\n", seed.LCGSeed)
	fmt.Fprintf(bw, "engine.Engine on a simulated network (latency 0, budget floor 1), request i at floor(i*1000/rate) ms;\n")
	fmt.Fprintf(bw, "their touches are delta messages (one per node and sync interval with changes, sent to every peer),\n")
	fmt.Fprintf(bw, "their false rejections the requests rejected while fewer than %d were accepted in the window before\n", Limit)
	for _, rate := range []int{10, 90} {
		fmt.Fprintf(bw, "\nclient rate %d/s: %d requests\n", rate, rate*DistWindowS)
		fmt.Fprintf(bw, "%-28s%10s%10s%6s%18s%17s\n", "scheme", "accepted", "rejected", "over", "false rejections", "counter touches")
		for _, row := range byRate[rate] {
			r := row.R
			fmt.Fprintf(bw, "%-28s%10d%10d%6d%18d%17d\n", row.Name, r.Accepted, r.Rejected, r.Over, r.FalseRejections, r.Touches)
		}
	}
	fmt.Fprintf(bw, "\ndelayed sync, client rate 90/s (%d requests)\n", 90*DistWindowS)
	fmt.Fprintf(bw, "%-10s%-22s%10s%6s%8s%11s%11s\n", "sync", "scheme", "accepted", "over", "ratio", "touches/s", "within 660")
	for _, row := range byInterval {
		r := row.R
		within := "yes"
		if float64(r.Accepted) > Limit*NFR1Ratio {
			within = "no"
		}
		fmt.Fprintf(bw, "%-10s%-22s%10d%6d%8.3f%11.1f%11s\n", fmt.Sprintf("%g s", row.Interval), row.Name,
			r.Accepted, r.Over, Ratio(r.Accepted, Limit), float64(r.Touches)/DistWindowS, within)
	}
	return bw.Flush()
}
