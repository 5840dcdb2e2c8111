package counter

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// coordCluster is N coordinated counters wired together in memory: ticks
// on multiples of the sync interval send every node's changes to every
// other node after a latency, and an ask reaches the key's coordinator and
// its answer comes back at once (the cluster layer's round trip is
// outside the counter). loss drops an answer: the asker then falls back,
// as a node whose deadline passed does, and releases when it denies.
type coordCluster struct {
	tb      testing.TB
	nodes   []*Counter
	lims    []Limit
	names   []string
	syncMs  int64
	latMs   int64
	next    int64 // next tick, ms
	flights []flight
	ids     uint64
	rng     *rand.Rand
	loss    float64 // share of answers lost
	dup     bool    // every sync message is delivered twice
	// deadAt[i] > 0: node i dies then (it sends and hears nothing more,
	// and its clients go to the next node), with whatever leases it holds
	deadAt []int64
	// lostAtDeath counts what a dead node admitted after its last tick:
	// requests nobody else ever learns of (a crash loses them), which the
	// bound of a healthy cluster does not cover
	lostAtDeath int64
	// counts by how a request was decided
	local, asked, fallback int
	fallbackDenied         int
	// stated, when set, gives node i's limit for a check that states its
	// max (nodeArrival.limit): a family's (stated_test.go)
	stated func(node int, max int64) Limit
}

type flight struct {
	at      int64
	to      int
	entries []Entry
}

func newCoordCluster(tb testing.TB, n int, limit int64, window time.Duration, slices int, seed uint64) *coordCluster {
	tb.Helper()
	cl := &coordCluster{tb: tb, syncMs: 200, rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		c := newCounter(tb, DefaultConfig())
		cc := DefaultClusterConfig(name)
		cc.Nodes = n
		if err := c.SetCluster(cc); err != nil {
			tb.Fatal(err)
		}
		cl.nodes = append(cl.nodes, c)
		cl.lims = append(cl.lims, mustLimit(tb, c, "r", limit, window, slices))
		cl.names = append(cl.names, name)
	}
	return cl
}

// coordinatorOf picks the key's coordinator, the same for every node.
func (cl *coordCluster) coordinatorOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(cl.nodes)))
}

// advance runs ticks and deliveries due by ms.
func (cl *coordCluster) advance(ms int64) {
	for {
		fi := -1
		for i, f := range cl.flights {
			if f.at <= ms && (fi < 0 || f.at < cl.flights[fi].at) {
				fi = i
			}
		}
		if cl.next <= ms && (fi < 0 || cl.next <= cl.flights[fi].at) {
			for i, c := range cl.nodes {
				if cl.dead(i, cl.next) {
					continue
				}
				es := c.AppendChanges(nil, at(cl.next))
				for j := range cl.nodes {
					if j != i && len(es) > 0 {
						cl.flights = append(cl.flights, flight{at: cl.next + cl.latMs, to: j, entries: es})
						if cl.dup {
							cl.flights = append(cl.flights, flight{at: cl.next + cl.latMs + 1, to: j, entries: es})
						}
					}
				}
			}
			cl.next += cl.syncMs
			continue
		}
		if fi < 0 {
			return
		}
		f := cl.flights[fi]
		cl.flights = append(cl.flights[:fi], cl.flights[fi+1:]...)
		if !cl.dead(f.to, f.at) {
			cl.nodes[f.to].Merge(at(f.at), f.entries)
		}
	}
}

// dead reports whether node i is dead at ms.
func (cl *coordCluster) dead(i int, ms int64) bool {
	return i < len(cl.deadAt) && cl.deadAt[i] > 0 && ms >= cl.deadAt[i]
}

// check decides one request of hits at node i at ms, as the cluster layer
// does: locally, or through the coordinator, or by the fallback.
func (cl *coordCluster) check(ms int64, i int, key string, hits int64) (allowed, exact bool) {
	return cl.checkWith(ms, i, key, hits, 0)
}

// checkWith is check of a request that states its limit, max (0: the
// node's registered limit).
func (cl *coordCluster) checkWith(ms int64, i int, key string, hits, max int64) (allowed, exact bool) {
	cl.advance(ms)
	for n := 0; cl.dead(i, ms) && n < len(cl.nodes); n++ {
		i = (i + 1) % len(cl.nodes) // its clients go elsewhere
	}
	defer func() {
		if allowed && i < len(cl.deadAt) && cl.deadAt[i] > 0 {
			lastTick := (cl.deadAt[i] - 1) / cl.syncMs * cl.syncMs
			if ms >= lastTick {
				cl.lostAtDeath += hits
			}
		}
	}()
	c, lim := cl.nodes[i], []Limit{cl.lims[i]}
	if max > 0 {
		lim[0] = cl.stated(i, max)
	}
	var res [1]Result
	d, err := c.Allow(at(ms), key, hits, lim, res[:])
	if err != nil {
		cl.tb.Fatal(err)
	}
	if !d.Coordinate {
		cl.local++
		return d.Allowed, true
	}
	cl.asked++
	k := cl.coordinatorOf(key)
	for n := 0; cl.dead(k, ms) && n < len(cl.nodes); n++ {
		k = (k + 1) % len(cl.nodes) // declared dead: the runner-up coordinates
	}
	var ask Ask
	c.PrepareAsk(at(ms), key, hits, lim, &ask)
	cl.ids++
	id := cl.ids
	kd, err := cl.nodes[k].Coordinate(at(ms), cl.names[i], id, &ask, res[:])
	if err != nil {
		cl.tb.Fatal(err)
	}
	if k == i {
		return kd.Allowed, true // decided and counted by Coordinate
	}
	if cl.loss > 0 && cl.rng.Float64() < cl.loss {
		// The answer is lost: the deadline passes, the node decides alone.
		cl.fallback++
		fd, err := c.AllowFallback(at(ms), key, hits, lim, res[:])
		if err != nil {
			cl.tb.Fatal(err)
		}
		if !fd.Allowed {
			cl.fallbackDenied++
			cl.nodes[k].Release(at(ms), cl.names[i], id, key, ask.Limits)
		}
		return fd.Allowed, false
	}
	if kd.Allowed {
		if _, err := c.Grant(at(ms), key, hits, lim, res[:]); err != nil {
			cl.tb.Fatal(err)
		}
		return true, true
	}
	c.RememberDenial(at(ms), key, hits, lim, res[:])
	return false, true
}

// run feeds arrivals (non-decreasing instants, each with a node) to the
// cluster and checks each exact denial against the oracle (NFR2) and the
// whole run against the bound (NFR1). It returns what was accepted.
func (cl *coordCluster) run(key string, limit, windowMs int64, arr []nodeArrival) (o *oracle, accepted, falseRejections int) {
	o = &oracle{}
	for _, a := range arr {
		ok, exact := cl.checkWith(a.t, a.node, key, a.hits, a.limit)
		if ok {
			o.accept(a.t, a.hits)
			accepted++
			continue
		}
		lim := limit
		if a.limit > 0 {
			lim = a.limit // a check that stated its limit is judged by it
		}
		if exact && o.inWindow(a.t, windowMs)+a.hits <= lim {
			falseRejections++
			cl.tb.Errorf("%s: request at %d ms on n%d (hits %d) denied with %d accepted in the window, limit %d",
				key, a.t, a.node, a.hits, o.inWindow(a.t, windowMs), lim)
		}
	}
	return o, accepted, falseRejections
}

type nodeArrival struct {
	t    int64
	node int
	hits int64
	// limit is the max the check states (coordCluster.stated); 0: none
	limit int64
}

// TestCoordinatedBursts are the cases on 8 nodes: a compliant
// client bursting its whole limit at one node, or over all nodes at once,
// is never denied; a further burst over all nodes stops within 1.1x.
func TestCoordinatedBursts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int64
		window   time.Duration
		slices   int
		pattern  func(limit int64) []nodeArrival
		accepted int // exactly, or -1 to skip
	}{
		{"600 at one node at once", 600, time.Minute, 12, func(l int64) []nodeArrival { return burst(0, 1, 0, int(l)) }, 600},
		{"600 at one node, then 600 more", 600, time.Minute, 12, func(l int64) []nodeArrival { return burst(0, 1, 0, 2*int(l)) }, 600},
		{"600 round robin at once", 600, time.Minute, 12, func(l int64) []nodeArrival { return burst(0, 8, 0, int(l)) }, 600},
		{"600 round robin in 150 ms, then 600 more", 600, time.Minute, 12, func(l int64) []nodeArrival {
			return append(burst(0, 8, 150, int(l)), burst(150, 8, 0, int(l))...)
		}, -1},
		{"10/1s: 10 at one node each second", 10, time.Second, 10, func(l int64) []nodeArrival {
			var a []nodeArrival
			for s := range int64(5) {
				a = append(a, burst(s*1000, 1, 0, 10)...)
			}
			return a
		}, 50},
		{"10/1s: 10 over 8 nodes each second, 30 more", 10, time.Second, 10, func(l int64) []nodeArrival {
			var a []nodeArrival
			for s := range int64(5) {
				a = append(a, burst(s*1000, 8, 0, 40)...)
			}
			return a
		}, 50},
		{"6000/60s at one node", 6000, time.Minute, 12, func(l int64) []nodeArrival { return burst(0, 1, 500, 7000) }, 6000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCoordCluster(t, 8, tc.limit, tc.window, tc.slices, 1)
			o, accepted, _ := cl.run("k", tc.limit, tc.window.Milliseconds(), tc.pattern(tc.limit))
			if tc.accepted >= 0 && accepted != tc.accepted {
				t.Errorf("accepted %d, want %d", accepted, tc.accepted)
			}
			bound := cl.nodes[0].WorstCase(tc.limit, tc.window)
			if got := o.maxInAnyWindow(tc.window.Milliseconds()); got > bound || float64(got) > 1.1*float64(tc.limit) {
				t.Errorf("%d in one window, bound %d, 1.1x %v", got, bound, 1.1*float64(tc.limit))
			}
			t.Logf("accepted %d: %d decided locally, %d asked the coordinator", accepted, cl.local, cl.asked)
		})
	}
}

// burst spreads n requests evenly over [start, start+spanMs), node i%nodes.
func burst(start int64, nodes int, spanMs int64, n int) []nodeArrival {
	a := make([]nodeArrival, n)
	for i := range n {
		a[i] = nodeArrival{t: start + int64(i)*spanMs/int64(n), node: i % nodes, hits: 1}
	}
	return a
}

// TestCoordinatedPropertyAgainstOracle throws random and adversarial
// multi-node patterns at coordinated clusters, with delta latency up to the
// grace, duplicated sync messages, and a node (a lease holder, often) that
// dies: no exact denial is ever false (NFR2) and no window ever holds more
// than the bound, itself within 1.1x (NFR1). With answers lost, the
// fallback's denials are not exact (it is the budget), but the others stay
// exact: a grant whose answer was lost is released or expires, never
// counted beside the slice that holds it.
func TestCoordinatedPropertyAgainstOracle(t *testing.T) {
	limits := []struct {
		limit  int64
		window time.Duration
		slices int
	}{{10, time.Second, 10}, {100, 10 * time.Second, 10}, {600, time.Minute, 12}, {6000, time.Minute, 12}}
	runs := 40
	if s := os.Getenv("LIMITERD_PROPERTY_RUNS"); s != "" {
		runs, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		runs = 8
	}
	for run := range runs {
		rng := rand.New(rand.NewPCG(uint64(run), 99))
		lp := limits[run%len(limits)]
		nodes := []int{2, 3, 8}[rng.IntN(3)]
		lat := []int64{0, 1, 5, 50}[rng.IntN(4)]
		loss := []float64{0, 0, 0.05}[rng.IntN(3)]
		dup := rng.IntN(2) == 0
		arr := randomPattern(rng, nodes, lp.limit, lp.window.Milliseconds())
		// A lease holder that dies: one node (not the coordinator, whose
		// death moves the key) stops at a random instant, with whatever
		// leases it holds stranded.
		var deadAt []int64
		if rng.IntN(2) == 0 && len(arr) > 0 {
			deadAt = make([]int64, nodes)
			deadAt[rng.IntN(nodes)] = 1 + rng.Int64N(arr[len(arr)-1].t+1)
		}
		name := fmt.Sprintf("run%d/L=%d/W=%v/N=%d/lat=%dms/loss=%v/dup=%v/dies=%v", run, lp.limit, lp.window, nodes, lat, loss, dup, deadAt != nil)
		t.Run(name, func(t *testing.T) {
			cl := newCoordCluster(t, nodes, lp.limit, lp.window, lp.slices, uint64(run))
			cl.latMs, cl.loss, cl.dup, cl.deadAt = lat, loss, dup, deadAt
			if k := cl.coordinatorOf("k"); deadAt != nil && deadAt[k] > 0 {
				deadAt[(k+1)%nodes], deadAt[k] = deadAt[k], 0
			}
			o, _, _ := cl.run("k", lp.limit, lp.window.Milliseconds(), arr)
			bound := cl.nodes[0].WorstCase(lp.limit, lp.window)
			got := o.maxInAnyWindow(lp.window.Milliseconds())
			if loss == 0 && (got > bound+cl.lostAtDeath || float64(got-cl.lostAtDeath) > 1.1*float64(lp.limit)) {
				t.Errorf("%d in one window, bound %d, 1.1x = %v, and %d admitted by the dying node after its last tick", got, bound, 1.1*float64(lp.limit), cl.lostAtDeath)
			}
		})
	}
}

// randomPattern mixes the shapes that stress a cluster: bursts at one
// node, bursts over all nodes, bursts placed on tick instants, steady
// streams at and above the limit rate, and idle gaps.
func randomPattern(rng *rand.Rand, nodes int, limit, windowMs int64) []nodeArrival {
	var arr []nodeArrival
	t := int64(0)
	end := 3 * windowMs
	for t < end && len(arr) < 20000 {
		switch rng.IntN(5) {
		case 0: // a burst at one node
			n := 1 + rng.IntN(int(limit))
			node := rng.IntN(nodes)
			for range n {
				arr = append(arr, nodeArrival{t: t, node: node, hits: 1})
			}
		case 1: // a burst over all nodes, on a tick
			t = t - t%200
			n := 1 + rng.IntN(int(limit)*2)
			for i := range n {
				arr = append(arr, nodeArrival{t: t, node: i % nodes, hits: 1})
			}
		case 2: // a steady stream at r x the limit rate for a while
			r := []float64{0.5, 1, 2, 9}[rng.IntN(4)]
			gap := max(1, int64(float64(windowMs)/(r*float64(limit))))
			for i := range int64(50 + rng.IntN(200)) {
				arr = append(arr, nodeArrival{t: t + i*gap, node: rng.IntN(nodes), hits: 1})
			}
			t += (50 + 200) * gap / 2
		case 3: // multi-hit requests
			for range 1 + rng.IntN(10) {
				arr = append(arr, nodeArrival{t: t, node: rng.IntN(nodes), hits: 1 + rng.Int64N(max(1, limit/10))})
			}
		default: // idle
		}
		t += rng.Int64N(windowMs / 4)
	}
	// Arrivals must be in time order.
	slices.SortStableFunc(arr, func(a, b nodeArrival) int { return cmp.Compare(a.t, b.t) })
	return arr
}

// TestGrantIsNeverCountedTwice steps one grant through its life: counted
// by the coordinator until the asker's slice shows it, then only there;
// released when the asker never counted it; expired otherwise.
func TestGrantIsNeverCountedTwice(t *testing.T) {
	cl := newCoordCluster(t, 2, 10, time.Second, 10, 1)
	a, k := cl.nodes[0], cl.nodes[1]
	la, lk := []Limit{cl.lims[0]}, []Limit{cl.lims[1]}
	count := func(c *Counter, l []Limit, ms int64) int64 {
		var res [1]Result
		if _, err := c.Allow(at(ms), "x", 10, l, res[:]); err != nil {
			t.Fatal(err)
		}
		return res[0].Count
	}
	var res [1]Result
	// 10/1s on 2 nodes: blind share 0, so the first request asks.
	d, _ := a.Allow(at(0), "x", 1, la, res[:])
	if !d.Coordinate {
		t.Fatalf("first request: %+v, want Coordinate", d)
	}
	var ask Ask
	a.PrepareAsk(at(0), "x", 1, la, &ask)
	if got, _ := k.Coordinate(at(0), "n0", 1, &ask, res[:]); !got.Allowed || res[0].Remaining != 9 {
		t.Fatalf("coordinator: %+v %+v, want allowed with 9 remaining", got, res[0])
	}
	if n := count(k, lk, 10); n != 1 {
		t.Fatalf("coordinator counts %d before the delta, want the grant: 1", n)
	}
	a.Grant(at(1), "x", 1, la, res[:])
	k.Merge(at(200), a.AppendChanges(nil, at(200)))
	if n := count(k, lk, 210); n != 1 {
		t.Fatalf("coordinator counts %d after the delta, want 1 (not the grant beside it)", n)
	}
	// A grant the asker never counts: released.
	a.PrepareAsk(at(300), "x", 1, la, &ask)
	k.Coordinate(at(300), "n0", 2, &ask, res[:])
	if n := count(k, lk, 301); n != 2 {
		t.Fatalf("with a second grant %d, want 2", n)
	}
	k.Release(at(302), "n0", 2, "x", ask.Limits)
	if n := count(k, lk, 303); n != 1 {
		t.Fatalf("after the release %d, want 1", n)
	}
	// And one never released: gone after two intervals and the grace.
	a.PrepareAsk(at(400), "x", 1, la, &ask)
	k.Coordinate(at(400), "n0", 3, &ask, res[:])
	if n := count(k, lk, 849); n != 2 {
		t.Fatalf("before expiry %d, want 2", n)
	}
	if n := count(k, lk, 850); n != 1 {
		t.Fatalf("after expiry %d, want 1", n)
	}
}

// TestRememberedDenial: after the coordinator's denial a node denies alone
// until the retry, then asks again.
func TestRememberedDenial(t *testing.T) {
	cl := newCoordCluster(t, 2, 10, time.Second, 10, 1)
	key := "x"
	for i := 0; cl.coordinatorOf(key) != 1; i++ {
		key = fmt.Sprint("x", i) // a key node 1 coordinates, so node 0 asks
	}
	// The coordinator fills the limit itself; node 0 has not heard of it.
	for i := range 10 {
		if ok, _ := cl.check(0, 1, key, 1); !ok {
			t.Fatalf("request %d denied", i)
		}
	}
	asked := cl.asked
	if ok, _ := cl.check(1, 0, key, 1); ok {
		t.Fatal("11th allowed")
	}
	if cl.asked != asked+1 {
		t.Fatalf("the 11th did not ask")
	}
	// Before the next sync node 0 knows of the 10 only from the denial.
	for ms := int64(2); ms < 200; ms += 10 {
		if ok, _ := cl.check(ms, 0, key, 1); ok {
			t.Fatalf("allowed at %d ms", ms)
		}
	}
	if cl.asked != asked+1 {
		t.Fatalf("asked %d more times within the retry, want 0", cl.asked-asked-1)
	}
	if ok, _ := cl.check(1000, 0, key, 1); !ok {
		t.Fatal("denied after the window moved on")
	}
}

// TestDenialOnPendingGrantsIsNotRemembered: a denial that needs the
// coordinator's pending grants (one may be a grant whose answer was lost)
// is not remembered by the asker; one on merged slices alone is.
func TestDenialOnPendingGrantsIsNotRemembered(t *testing.T) {
	cl := newCoordCluster(t, 3, 10, time.Second, 10, 1)
	key := "x"
	for i := 0; cl.coordinatorOf(key) != 2; i++ {
		key = fmt.Sprint("x", i)
	}
	k := cl.nodes[2]
	ask := func(node int, ms int64, id uint64) (Decision, []Result) {
		var a Ask
		lim := []Limit{cl.lims[node]}
		cl.nodes[node].PrepareAsk(at(ms), key, 1, lim, &a)
		res := make([]Result, 1)
		d, err := k.Coordinate(at(ms), cl.names[node], id, &a, res)
		if err != nil {
			t.Fatal(err)
		}
		return d, res
	}
	// Ten grants to node 0, whose answers are "lost": node 0 counts none.
	for i := range 10 {
		if d, _ := ask(0, 0, uint64(i+1)); !d.Allowed {
			t.Fatalf("grant %d denied", i)
		}
	}
	d, res := ask(1, 1, 100)
	if d.Allowed || res[0].Pending != 10 {
		t.Fatalf("node 1's ask: %+v %+v, want denied on 10 pending grants", d, res[0])
	}
	lim1 := []Limit{cl.lims[1]}
	cl.nodes[1].RememberDenial(at(1), key, 1, lim1, res)
	var r [1]Result
	if d, _ := cl.nodes[1].Allow(at(2), key, 1, lim1, r[:]); !d.Coordinate {
		t.Fatalf("after a denial on pending grants: %+v, want to ask again", d)
	}
	// Node 2 fills the window itself: a denial on merged slices is remembered.
	for i := range 10 {
		k.Release(at(3), cl.names[0], uint64(i+1), key, []string{cl.lims[0].ID()})
	}
	for range 10 {
		if ok, _ := cl.check(4, 2, key, 1); !ok {
			t.Fatal("the coordinator's own check denied")
		}
	}
	d, res = ask(1, 5, 101)
	if d.Allowed || res[0].Pending != 0 {
		t.Fatalf("node 1's ask: %+v %+v, want denied on merged slices", d, res[0])
	}
	cl.nodes[1].RememberDenial(at(5), key, 1, lim1, res)
	if d, _ := cl.nodes[1].Allow(at(6), key, 1, lim1, r[:]); d.Coordinate || d.Allowed {
		t.Fatalf("after a denial on merged slices: %+v, want denied here", d)
	}
}
