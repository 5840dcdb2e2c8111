package scale

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/internal/burst"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// Row is what one cluster size measured. Traffic is every node's; the
// rest is node 0's, the node that received every message from the start
// (during the warm-up the others receive nothing).
type Row struct {
	N       int
	Rate    int64 // background checks per second, all nodes
	Seconds int64
	Traffic Traffic
	// Node 0 during the measurement.
	RecvMsgs, RecvBytes, RecvEntries, Merged int64
	// SentEntries is the entries one node's Tick produced during the
	// measurement, the mean over the nodes: every node received every
	// entry once from each of its N-1 peers.
	SentEntries float64
	// AllRecvMsgs and AllRecvBytes are what all nodes received during the
	// measurement: every copy sent, when nothing is lost.
	AllRecvMsgs, AllRecvBytes int64
	// Node 0 at the end: tracked (limit, key) pairs and live slices.
	Pairs, Slices int64
	// With Config.Cost: node 0's live heap and its Engine's time over the
	// measurement. The other nodes' is not reported: they did not receive
	// during the warm-up, so they hold less state than a node in steady
	// state does.
	Heap                          uint64
	Times                         clustersim.Times
	Hot, Compliant                clustersim.ClientRun
	HotRate, CompliantRate, AccMs int64
	// Burst is the adversarial pattern that reaches the derived bound:
	// Burst on this cluster size.
	Burst clustersim.ClientRun
}

// Accuracy clients: the 9x (hot) and 0.9x (compliant) clients at
// HS3, spread over all nodes by the seed's LCG, for three windows.
const (
	HotRate       = 9 * seedstudy.Limit / (seedstudy.WindowMs / 1000)
	CompliantRate = 9 * seedstudy.Limit / (seedstudy.WindowMs / 1000) / 10
	AccuracyMs    = 3 * seedstudy.WindowMs
)

// Run runs every cluster size of cfg in turn (each uses every core),
// calling progress, if not nil, after each with the wall time it took.
func Run(cfg Config, progress func(n int, took time.Duration)) ([]Row, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		start := time.Now()
		row, err := runSize(cfg, n)
		if err != nil {
			return nil, fmt.Errorf("%d nodes: %w", n, err)
		}
		rows = append(rows, row)
		if progress != nil {
			progress(n, time.Since(start))
		}
	}
	return rows, nil
}

// runSize measures one cluster size: the load run, then the two accuracy
// clients, each alone on a fresh cluster of the same size.
func runSize(cfg Config, n int) (Row, error) {
	row := Row{N: n, Seconds: cfg.Seconds, HotRate: HotRate, CompliantRate: CompliantRate, AccMs: AccuracyMs}
	r, err := newLoad(cfg, n)
	if err != nil {
		return row, err
	}
	row.Rate = r.rate
	if err := r.run(); err != nil {
		return row, err
	}
	row.Traffic = r.traffic
	row.RecvMsgs, row.RecvBytes, row.RecvEntries, row.Merged = r.received(0)
	var all int64
	for i := range n {
		m, b, e, _ := r.received(i)
		row.AllRecvMsgs += m
		row.AllRecvBytes += b
		all += e
	}
	row.SentEntries = float64(all) / float64(n-1) / float64(n)
	end := cfg.Warmup.Milliseconds() + cfg.Seconds*1000
	row.Pairs, row.Slices = r.state(0, end)
	if cfg.Cost {
		row.Times = r.times(0)
		row.Heap = r.sim.DropHeap(0)
	}

	// The accuracy clients run the budget's design, as the load does
	// (load.go).
	sc := clustersim.BudgetConfig()
	sc.Nodes = n
	for _, c := range []struct {
		rate int64
		out  *clustersim.ClientRun
	}{{HotRate, &row.Hot}, {CompliantRate, &row.Compliant}} {
		if *c.out, err = clustersim.RunClient(sc, clustersim.SteadyAt(float64(c.rate), AccuracyMs), clustersim.LCGNodes(cfg.Seed, n)); err != nil {
			return row, err
		}
	}
	b := Burst(sc)
	row.Burst, err = clustersim.RunClient(sc, b.At, b.Node())
	return row, err
}

// Burst is the worst case of the derived bound L + N x f + N x T
// (docs/blind-interval.md) on sc's cluster: every node hides its tail T in
// a slice that expires one window later, when a fresh burst of a whole
// limit reaches every node at the same instant: each node admits its
// budget, f + L/N, before any of them hears of the others.
func Burst(sc clustersim.Config) burst.NodePattern {
	p := burst.NodePattern{Name: "burst on every node"}
	for n := range sc.Nodes {
		for range sc.Limit {
			p.At, p.Nodes = append(p.At, 0), append(p.Nodes, n)
		}
	}
	return burst.TailsThen(sc, p)
}
