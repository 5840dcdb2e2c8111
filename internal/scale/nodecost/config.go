package nodecost

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/clustersim"
)

// ErrInvalidConfig wraps every invalid setting of a run.
var ErrInvalidConfig = errors.New("nodecost: invalid run")

// Scenario is what happens to the network during a run.
type Scenario string

const (
	// Healthy: every message arrives.
	Healthy Scenario = "healthy"
	// Fallback: one node (Config.CutNode) goes silent from CutAt for CutFor, as
	// a node that dies and comes back: cut off both ways, and the load
	// balancer sends its requests to the others. The others' asks to it
	// go unanswered, they decide those by the budget (fall back) and,
	// after a few missed asks, fail its keys over to the next
	// coordinator.
	Fallback Scenario = "fallback"
	// Partition: the same cut, but the node still takes its share of the
	// requests and decides them alone, by the budget: a partition of one
	// node, where each side counts alone.
	Partition Scenario = "partition"
)

// Spread is how the load balancer in front of the nodes picks each
// check's node.
type Spread string

const (
	// RoundRobin: check i goes to node i mod N. Each node takes its share
	// at an even pace; a key's checks still reach every node, as the keys
	// are drawn at random.
	RoundRobin Spread = "round-robin"
	// Random: each check goes to a node drawn uniformly (seeded by
	// Config.Seed), as a random or least-loaded balancer, or clients that
	// pick a node themselves, spread them: a node's share comes in
	// bursts. limitload spreads real checks either way, so that the two
	// compare (BENCHMARKS.md, "HS2's waits on real processes, by load and
	// by spread").
	Random Spread = "random"
)

// Config is one limitsim scale run: every scenario on every cluster size.
type Config struct {
	// Nodes are the cluster sizes, each 2 to clustersim.MaxNodes.
	Nodes []int
	// Scenarios run for each size, in this order.
	Scenarios []Scenario
	// RatePerNode is the checks per second each node takes.
	RatePerNode int64
	// KeysPerNode times N is the number of distinct keys: HS1's 200,000
	// keys per 8 nodes is 25,000.
	KeysPerNode int
	// Zipf is the exponent s of the keys' popularity: the key of rank k
	// (from 0) is drawn with probability proportional to (1+k)^-s
	// (math/rand/v2's Zipf, which needs s > 1). It sets what a node must
	// hold once each node keeps only the keys it sees and those it
	// coordinates. At 1.2 the hottest key takes about 18% of the checks,
	// and by Zipf's mass a node sees about 27,000 distinct keys in a
	// minute at 8 nodes and 41,000 at 1,000 (the tail grows with the
	// keys), and coordinates about 6,700 of the 6.6 million the cluster
	// sees: at the 150 bytes a pair measured at 8 nodes, about 7 GB for
	// 1,000 nodes. At 1.1 it would be 77,000 and 12,600 keys a node,
	// about 14 GB, twice that with the collector's headroom: more than a
	// 24 GiB machine.
	Zipf float64
	// Seed seeds the key draw (PCG) and, with Spread Random, the nodes'
	// draw (another PCG stream); the network loses nothing unless cut.
	Seed uint64
	// Spread is how the checks are spread over the nodes: RoundRobin
	// (the default) or Random.
	Spread Spread
	// Duration is the model time of the load; at least one window (60 s)
	// for the figures the issue asks for, less for quick looks.
	Duration time.Duration
	// Judged is how many of the hottest keys are judged exactly (each
	// admitted instant logged); 0 derives it: every rank whose expected
	// checks in a window reach a quarter of the limit, so that a key
	// outside them is rejected rightly only by a large fluctuation. A
	// rejection of a key outside them counts as a false rejection: it
	// cannot be proved right.
	Judged int
	// CutAt and CutFor place the cut of the Fallback and Partition
	// scenarios.
	CutAt, CutFor time.Duration
	// CutNode is the node they cut off ("node-0" is 0): below the smallest
	// cluster size less one, since the last node is the one Alone records.
	// Which node it is decides which keys lose their coordinator, and so
	// how hot the keys the cut touches are.
	CutNode int
	// Workers run each instant's ticks and deliveries
	// (clustersim.Config.Workers); they change no figure but the times.
	Workers int
	// Latency is how long every message takes to reach its peer
	// (clustersim.Config.Latency): 0, as on the simulated network by
	// default, or a LAN's millisecond, which an ask's round trip and a
	// delta's delivery then take. Its round trip must be shorter than
	// the ask deadline (decision.DefaultDeadline): past it no answer
	// comes in time, and every check at the margin falls back to the
	// budget, as on a network too slow for the deadline.
	Latency time.Duration
	// Sync, Grace, Tolerance, LeaseShare and LeaseTime are every node's
	// sync interval, delivery grace (counter.ClusterConfig.DeliveryGrace,
	// a share of Sync), tolerance (counter.Config) and lease settings
	// (counter.ClusterConfig), limiterd's in DefaultConfig: other values
	// show what a faster sync, a longer grace, a bound looser than 1.1 x
	// the limit or other leases would change. The derived bound
	// (Row.BoundRatio) follows them.
	Sync       time.Duration
	Grace      float64
	Tolerance  float64
	LeaseShare float64
	LeaseTime  time.Duration
	// Alone records one node (AloneNode) as the simulation runs, to a
	// temporary file, and replays it on that node alone afterwards
	// (clustersim.Replay): Row.EngineNsPerCheckAlone, the engine time a
	// node would spend on a machine of its own, which a simulation of
	// every node in one process cannot measure at large N.
	Alone bool
	// Records, with Alone, is a directory to keep each run's record in,
	// as RecordName names it, for ReplayRecord; empty: a temporary file,
	// removed after the run.
	Records string

	// editEngine, if set, changes the nodes' engine configuration
	// (clustersim.Config.EditEngine): the tests turn failover off with it.
	editEngine func(*engine.Config)
}

// DefaultConfig is the run: 8 to 1,000 nodes, 5,000 checks/s a
// node over 25,000 x N keys, Zipf 1.2, one window, healthy and with one
// node silent for 5 s from 20 s.
func DefaultConfig() Config {
	sim, cc := clustersim.DefaultConfig(), counter.DefaultClusterConfig("x")
	return Config{
		Nodes: []int{8, 64, 256, 1000}, Scenarios: []Scenario{Healthy, Fallback},
		RatePerNode: 5000, KeysPerNode: 25_000, Zipf: 1.2, Seed: 20260730, Spread: RoundRobin,
		Duration: time.Minute, CutAt: 20 * time.Second, CutFor: 5 * time.Second, Workers: runtime.GOMAXPROCS(0),
		Alone: true,
		Sync:  sim.Sync, Grace: sim.Grace, Tolerance: counter.DefaultConfig().Tolerance, LeaseShare: cc.LeaseShare, LeaseTime: cc.LeaseTime,
	}
}

// Validate returns every problem of c, each wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...))
	}
	if len(c.Nodes) == 0 {
		bad("no cluster size given")
	}
	for _, n := range c.Nodes {
		if n < 2 || n > clustersim.MaxNodes {
			bad("cluster sizes must be between 2 and %d, got %d", clustersim.MaxNodes, n)
			break
		}
	}
	if len(c.Scenarios) == 0 {
		bad("no scenario given")
	}
	fallback := false
	for _, s := range c.Scenarios {
		switch s {
		case Healthy:
		case Fallback, Partition:
			fallback = true
		default:
			bad("unknown scenario %q (healthy, fallback, partition)", s)
		}
	}
	if c.RatePerNode < 1 || c.RatePerNode > 1_000_000 {
		bad("rate per node must be between 1 and 1000000, got %d", c.RatePerNode)
	}
	if c.KeysPerNode < 1 || c.KeysPerNode > 1_000_000 {
		bad("keys per node must be between 1 and 1000000, got %d", c.KeysPerNode)
	}
	if !(c.Zipf > 1 && c.Zipf <= 4) {
		bad("the Zipf exponent must be above 1 and at most 4, got %v", c.Zipf)
	}
	if c.Spread != RoundRobin && c.Spread != Random {
		bad("unknown spread %q (round-robin, random)", c.Spread)
	}
	if c.Duration < time.Millisecond || c.Duration > time.Hour || c.Duration%time.Millisecond != 0 {
		bad("duration must be a whole number of milliseconds between 1ms and 1h, got %v", c.Duration)
	}
	if c.Judged < 0 {
		bad("judged keys must not be negative, got %d", c.Judged)
	}
	if fallback && (c.CutAt < 0 || c.CutFor <= 0 || c.CutAt%time.Millisecond != 0 || c.CutFor%time.Millisecond != 0 || c.CutAt+c.CutFor > c.Duration) {
		bad("the cut (at %v for %v) must be whole milliseconds, last a while and end within the run (%v)", c.CutAt, c.CutFor, c.Duration)
	}
	if fallback && (c.CutNode < 0 || c.CutNode >= slices.Min(append([]int{clustersim.MaxNodes}, c.Nodes...))-1) {
		bad("the cut node must be between 0 and the smallest cluster size less 2 (the last node is replayed alone), got %d", c.CutNode)
	}
	if c.Workers < 0 {
		bad("workers must not be negative, got %d", c.Workers)
	}
	if c.Sync < time.Millisecond || c.Sync > 10*time.Second || c.Sync%time.Millisecond != 0 {
		bad("the sync interval must be a whole number of milliseconds between 1ms and 10s, got %v", c.Sync)
	}
	if c.Latency < 0 || c.Latency%time.Millisecond != 0 || 2*c.Latency >= decision.DefaultDeadline {
		bad("the latency must be a whole number of milliseconds whose round trip is below the ask deadline of %v, got %v", decision.DefaultDeadline, c.Latency)
	}
	if !(c.Grace >= 0 && c.Grace <= 1) {
		bad("the delivery grace must be between 0 and 1 (a share of the sync interval), got %v", c.Grace)
	}
	if !(c.Tolerance > 0 && c.Tolerance <= 1) {
		bad("the tolerance must be above 0 and at most 1, got %v", c.Tolerance)
	}
	if !(c.LeaseShare >= 0 && c.LeaseShare <= 1) {
		bad("the lease share must be between 0 (no leases) and 1, got %v", c.LeaseShare)
	}
	if c.LeaseShare > 0 && (c.LeaseTime <= 0 || c.LeaseTime > counter.MaxWindow) {
		bad("the lease time must be above 0 and at most %v, got %v", counter.MaxWindow, c.LeaseTime)
	}
	return errors.Join(errs...)
}
