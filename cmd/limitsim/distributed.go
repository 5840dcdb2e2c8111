package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// The seed's distributed model (hiz/dagitik.mjs): one client, one 60 s
// window, HS3 and HS4.
const (
	distNodes    = 8  // DUGUM (HS4)
	distWindowS  = 60 // PENCERE, in seconds
	distSyncSeed = 0.2
)

// distScheme is one of the seed's three ways to count across nodes.
type distScheme int

const (
	schemeCentral distScheme = iota // "merkezi": every request touches one shared counter
	schemeSplit                     // "bolunmus kota": each node enforces limit/N alone
	schemeDelayed                   // "gecikmeli esitleme": local counts merged every interval
)

func (s distScheme) String() string {
	switch s {
	case schemeCentral:
		return "central counter"
	case schemeSplit:
		return fmt.Sprintf("quota split %d/%d per node", seedLimit, distNodes)
	default:
		return "delayed sync"
	}
}

// distResult is one run of a distributed scheme.
type distResult struct {
	requests, accepted, rejected int
	over                         int // accepted beyond the limit (all requests lie in one window)
	falseRejections              int
	touches                      int // counter touches: writes to the shared view
}

// seedDistributed is the seed's kos({duzen, hiz, aralik, tohum}) operation
// for operation: request i at t = i/rate seconds (float64), its node drawn
// by the LCG for every scheme, the delayed scheme syncing before a request
// when t - lastSync >= interval (float64). False rejections are the seed's:
// every rejection when the client sends at most the limit, else none.
func seedDistributed(scheme distScheme, rate int, interval float64, seed uint32) distResult {
	rnd := newLCG(seed)
	n := rate * distWindowS
	local := make([]int, distNodes)
	var global, lastGlobal, accepted, rejected, touches int
	lastSync := 0.0
	for i := range n {
		t := float64(i) / float64(rate)
		d := rnd.Node(distNodes)
		if scheme == schemeDelayed && t-lastSync >= interval {
			lastGlobal, lastSync = global, t
			clear(local)
		}
		var ok bool
		switch scheme {
		case schemeCentral:
			touches++
			ok = global < seedLimit
		case schemeSplit:
			ok = float64(local[d]) < float64(seedLimit)/distNodes
		default:
			ok = lastGlobal+local[d] < seedLimit
		}
		if ok {
			accepted++
			global++
			local[d]++
		} else {
			rejected++
		}
	}
	if scheme == schemeDelayed {
		touches = distNodes * int(math.Floor(float64(distWindowS)/interval))
	}
	r := distResult{requests: n, accepted: accepted, rejected: rejected, touches: touches, over: max(0, accepted-seedLimit)}
	if n <= seedLimit {
		r.falseRejections = rejected
	}
	return r
}

// limiterdDistributed runs the same client on a simulated cluster of
// limiterd nodes: request i at floor(i*1000/rate) ms (the counter's clock
// has 1 ms resolution), at the node the same LCG draws. Touches are the
// delta messages the nodes' Syncers produced (one per node and sync
// interval with changes, each sent to every peer); false rejections are
// rejections while fewer than the limit were accepted in the window before.
func limiterdDistributed(sc simConfig, rate int, seed uint32) (distResult, error) {
	sim, err := newSimCluster(sc)
	if err != nil {
		return distResult{}, err
	}
	rnd := newLCG(seed)
	ty := newTally(sc.window.Milliseconds(), sc.limit)
	n := rate * distWindowS
	var d limiter.Decision
	for i := range n {
		at := int64(i) * 1000 / int64(rate)
		if err := sim.check(at, limiterdKey, rnd.Node(sc.nodes), &d); err != nil {
			return distResult{}, err
		}
		ty.record(at, limiterdKey, d.Allowed, d.Untracked)
	}
	st, err := sim.finish()
	if err != nil {
		return distResult{}, err
	}
	return distResult{
		requests: n, accepted: ty.accepted, rejected: ty.rejected,
		over: max(0, ty.accepted-int(sc.limit)), falseRejections: ty.falseRejections, touches: st.produced,
	}, nil
}

// distRow is one row of a distributed table.
type distRow struct {
	name     string
	interval float64 // seconds
	r        distResult
}

// limiterdSim is the seed's cluster with limiterd's settings, a sync
// interval in seconds and the budget on or off.
func limiterdSim(interval float64, budget bool) simConfig {
	sc := budgetSimConfig()
	sc.sync = time.Duration(math.Round(interval*1000)) * time.Millisecond
	sc.budget = budget
	return sc
}

// distTables computes the seed's two distributed tables with limiterd's
// rows added: per client rate (10/s and 90/s) the three schemes at 0.2 s,
// then the delayed sync at 90/s over four intervals.
func distTables() (byRate map[int][]distRow, byInterval []distRow, err error) {
	byRate = make(map[int][]distRow)
	for _, rate := range []int{10, 90} {
		for _, s := range []distScheme{schemeCentral, schemeSplit, schemeDelayed} {
			name := s.String()
			if s == schemeDelayed {
				name += " (0.2 s)"
			}
			byRate[rate] = append(byRate[rate], distRow{name, distSyncSeed, seedDistributed(s, rate, distSyncSeed, seedLCGSeed)})
		}
		for _, budget := range []bool{true, false} {
			r, err := limiterdDistributed(limiterdSim(distSyncSeed, budget), rate, seedLCGSeed)
			if err != nil {
				return nil, nil, err
			}
			byRate[rate] = append(byRate[rate], distRow{limiterdName(budget), distSyncSeed, r})
		}
	}
	for _, iv := range []float64{0.2, 1, 2, 5} {
		byInterval = append(byInterval, distRow{"delayed sync", iv, seedDistributed(schemeDelayed, 90, iv, seedLCGSeed)})
		for _, budget := range []bool{true, false} {
			r, err := limiterdDistributed(limiterdSim(iv, budget), 90, seedLCGSeed)
			if err != nil {
				return nil, nil, err
			}
			byInterval = append(byInterval, distRow{limiterdName(budget), iv, r})
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

// writeDistTables prints the tables after the window table of limitsim seed.
func writeDistTables(w io.Writer, byRate map[int][]distRow, byInterval []distRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "\ndistributed counting (hiz/dagitik.mjs): %d nodes, one %d s window, limit %d, request i at i/rate s\n",
		distNodes, distWindowS, seedLimit)
	fmt.Fprintf(bw, "on the node drawn by the seed's LCG (seed %d); limiterd rows run the real counter, limiter and\n", seedLCGSeed)
	fmt.Fprintf(bw, "cluster.Syncer on a simulated network (latency 0, budget floor 1), request i at floor(i*1000/rate) ms;\n")
	fmt.Fprintf(bw, "their touches are delta messages (one per node and sync interval with changes, sent to every peer),\n")
	fmt.Fprintf(bw, "their false rejections the requests rejected while fewer than %d were accepted in the window before\n", seedLimit)
	for _, rate := range []int{10, 90} {
		fmt.Fprintf(bw, "\nclient rate %d/s: %d requests\n", rate, rate*distWindowS)
		fmt.Fprintf(bw, "%-28s%10s%10s%6s%18s%17s\n", "scheme", "accepted", "rejected", "over", "false rejections", "counter touches")
		for _, row := range byRate[rate] {
			r := row.r
			fmt.Fprintf(bw, "%-28s%10d%10d%6d%18d%17d\n", row.name, r.accepted, r.rejected, r.over, r.falseRejections, r.touches)
		}
	}
	fmt.Fprintf(bw, "\ndelayed sync, client rate 90/s (%d requests)\n", 90*distWindowS)
	fmt.Fprintf(bw, "%-10s%-22s%10s%6s%8s%11s%11s\n", "sync", "scheme", "accepted", "over", "ratio", "touches/s", "within 660")
	for _, row := range byInterval {
		r := row.r
		within := "yes"
		if float64(r.accepted) > seedLimit*nfr1Ratio {
			within = "no"
		}
		fmt.Fprintf(bw, "%-10s%-22s%10d%6d%8.3f%11.1f%11s\n", fmt.Sprintf("%g s", row.interval), row.name,
			r.accepted, r.over, ratio(r.accepted, seedLimit), float64(r.touches)/distWindowS, within)
	}
	return bw.Flush()
}
