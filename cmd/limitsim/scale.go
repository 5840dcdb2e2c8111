package main

import (
	"errors"
	"fmt"
	"time"
)

// The scale evaluation (issue 4, figure 3): what the sync costs a node as
// the cluster grows, on limiterd's real counter, limiter and Syncer, with
// the traffic counted in the Syncer's real encoded bytes.

// scaleConfig is what limitsim scale runs.
type scaleConfig struct {
	nodes []int // cluster sizes, one run each
	keys  int   // distinct keys of the background load (HS1)
	// rate is the background load in checks per second, all nodes
	// together (HS2); perNode, when positive, replaces it with perNode x N.
	rate, perNode int64
	seconds       int64         // measured model seconds, after the warm-up
	warmup        time.Duration // model time before the measurement
	seed          uint32        // the LCG that draws keys and the accuracy clients' nodes
	// cost measures node 0's live heap and the wall-clock time spent in
	// the Syncer: machine-dependent, so tests turn it off.
	cost bool
}

// defaultScaleConfig is limitsim scale without flags: HS1 and HS2 on 8 to
// 128 nodes, a window of warm-up, then 10 s measured.
func defaultScaleConfig() scaleConfig {
	return scaleConfig{
		nodes: []int{8, 16, 32, 64, 128}, keys: 200_000, rate: 40_000,
		seconds: 10, warmup: seedWindowMs * time.Millisecond, seed: seedLCGSeed, cost: true,
	}
}

// errScaleConfig wraps every invalid scale setting.
var errScaleConfig = errors.New("invalid scale run")

// totalRate is the background checks per second on n nodes.
func (c scaleConfig) totalRate(n int) int64 {
	if c.perNode > 0 {
		return c.perNode * int64(n)
	}
	return c.rate
}

func (c scaleConfig) validate() error {
	sync := defaultSimConfig().sync
	switch {
	case len(c.nodes) == 0:
		return fmt.Errorf("%w: no cluster size given", errScaleConfig)
	case c.keys < 1 || c.keys > 10_000_000:
		return fmt.Errorf("%w: keys must be between 1 and 10000000, got %d", errScaleConfig, c.keys)
	case c.rate < 1 || c.rate > 10_000_000:
		return fmt.Errorf("%w: rate must be between 1 and 10000000, got %d", errScaleConfig, c.rate)
	case c.perNode < 0 || c.perNode > 1_000_000:
		return fmt.Errorf("%w: rate per node must be between 0 and 1000000, got %d", errScaleConfig, c.perNode)
	case c.seconds < 1 || c.seconds > 3600:
		return fmt.Errorf("%w: seconds must be between 1 and 3600, got %d", errScaleConfig, c.seconds)
	case c.warmup < 0 || c.warmup > time.Hour || c.warmup%sync != 0:
		return fmt.Errorf("%w: warm-up must be a multiple of the sync interval (%v) between 0 and 1h, got %v", errScaleConfig, sync, c.warmup)
	}
	for _, n := range c.nodes {
		if n < 2 || n > 256 {
			return fmt.Errorf("%w: cluster sizes must be between 2 and 256, got %d", errScaleConfig, n)
		}
	}
	return nil
}

// scaleRow is what one cluster size measured. Traffic is every node's;
// the rest is node 0's, the node that received every message from the
// start (during the warm-up the others receive nothing).
type scaleRow struct {
	n       int
	rate    int64 // background checks per second, all nodes
	seconds int64
	traffic scaleTraffic
	// Node 0 during the measurement.
	recvMsgs, recvBytes, recvEntries, merged int64
	// sentEntries is the entries one node's Tick produced during the
	// measurement, the mean over the nodes: every node received every
	// entry once from each of its N-1 peers.
	sentEntries float64
	// allRecvMsgs and allRecvBytes are what all nodes received during the
	// measurement: every copy sent, when nothing is lost.
	allRecvMsgs, allRecvBytes int64
	// Node 0 at the end: tracked (limit, key) pairs and live slices.
	pairs, slices int64
	// With cost: node 0's live heap and its Syncer's time over the
	// measurement. The other nodes' is not reported: they did not receive
	// during the warm-up, so they hold less state than a node in steady
	// state does.
	heap                          uint64
	syncTick, syncHot, syncRecv   syncTime
	hot, compliant                clientRun
	hotRate, compliantRate, accMs int64
	// burst is the adversarial pattern that reaches the derived bound:
	// scaleBurst on this cluster size.
	burst clientRun
}

// Accuracy clients: the 9x (hot) and 0.9x (compliant) clients at
// HS3, spread over all nodes by the seed's LCG, for three windows.
const (
	scaleHotRate       = 9 * seedLimit / (seedWindowMs / 1000)
	scaleCompliantRate = 9 * seedLimit / (seedWindowMs / 1000) / 10
	scaleAccuracyMs    = 3 * seedWindowMs
)

// runScale runs every cluster size of cfg in turn (each uses every core),
// calling progress, if not nil, after each with the wall time it took.
func runScale(cfg scaleConfig, progress func(n int, took time.Duration)) ([]scaleRow, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rows := make([]scaleRow, 0, len(cfg.nodes))
	for _, n := range cfg.nodes {
		start := time.Now()
		row, err := runScaleSize(cfg, n)
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

// runScaleSize measures one cluster size: the load run, then the two
// accuracy clients, each alone on a fresh cluster of the same size.
func runScaleSize(cfg scaleConfig, n int) (scaleRow, error) {
	row := scaleRow{n: n, seconds: cfg.seconds, hotRate: scaleHotRate, compliantRate: scaleCompliantRate, accMs: scaleAccuracyMs}
	r, err := newScaleRun(cfg, n)
	if err != nil {
		return row, err
	}
	row.rate = r.rate
	if err := r.run(); err != nil {
		return row, err
	}
	row.traffic = r.traffic
	row.recvMsgs, row.recvBytes, row.recvEntries, row.merged = r.nodes[0].received()
	var all int64
	for _, nd := range r.nodes {
		m, b, e, _ := nd.received()
		row.allRecvMsgs += m
		row.allRecvBytes += b
		all += e
	}
	row.sentEntries = float64(all) / float64(n-1) / float64(n)
	end := cfg.warmup.Milliseconds() + cfg.seconds*1000
	row.pairs, row.slices = r.state(0, end)
	if cfg.cost {
		nd := r.nodes[0]
		row.syncTick, row.syncHot, row.syncRecv = nd.tick, nd.hot, nd.receive
		row.heap = r.dropHeap(0)
	}

	// The accuracy clients run the budget's design, as the load does
	// (scalesim.go).
	sc := budgetSimConfig()
	sc.nodes = n
	for _, c := range []struct {
		rate int64
		out  *clientRun
	}{{scaleHotRate, &row.hot}, {scaleCompliantRate, &row.compliant}} {
		if *c.out, err = runClient(sc, steadyAt(float64(c.rate), scaleAccuracyMs), lcgNodes(cfg.seed, n)); err != nil {
			return row, err
		}
	}
	b := scaleBurst(sc)
	row.burst, err = runClient(sc, b.at, b.node())
	return row, err
}

// scaleBurst is the worst case of the derived bound L + N x f + N x T
// (docs/blind-interval.md) on sc's cluster: every node hides its tail T in
// a slice that expires one window later, when a fresh burst of a whole
// limit reaches every node at the same instant: each node admits its
// budget, f + L/N, before any of them hears of the others.
func scaleBurst(sc simConfig) nodePattern {
	p := nodePattern{name: "burst on every node"}
	for n := range sc.nodes {
		for range sc.limit {
			p.at, p.nodes = append(p.at, 0), append(p.nodes, n)
		}
	}
	return tailsThen(sc, p)
}
