package clustersim

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// ErrInvalidConfig wraps every invalid simulation setting.
var ErrInvalidConfig = errors.New("clustersim: invalid cluster simulation")

// MaxNodes is the largest cluster New builds: limitsim scale runs 1,000
// nodes (issue 20), and memberlist's membership reaches thousands.
const MaxNodes = 4096

// Config describes a simulated cluster: N nodes, each running limiterd's
// real counter (in cluster mode), limiter, decision.Decider (the policy at
// the margin: the key's coordinator decides, or the budget after the
// deadline) and engine.Engine (the sync policy: deltas, anti-entropy,
// heartbeats, hellos, catch-ups; the asks, answers and releases of the
// coordination), joined by a simulated network on a simulated clock. The
// simulator owns only the network (latency, duplication, loss, reordering,
// partitions) and the clocks.
type Config struct {
	// Nodes is the cluster's size, 1 to MaxNodes; node i is named "node-i".
	Nodes int
	// Limit, Window and Slices are the one rule every node enforces.
	Limit  int64
	Window time.Duration
	Slices int
	// Sync is the sync interval (the counters'): nodes call Engine.Tick at
	// its multiples (true time, or each node's clock with ClockTicks).
	Sync time.Duration
	// Latency is how long a message takes to reach a peer.
	Latency time.Duration
	// Skew spreads the nodes' clocks: node i reads true time plus an
	// offset evenly spread over [-Skew, +Skew] (node 0 at -Skew).
	Skew time.Duration
	// Ahead sets node 0's clock ahead of true time by this much more
	// (negative: behind), on top of Skew: one node's clock off, as fault
	// scenario 5 of e2e/faults sets it (-test-clock-offset).
	Ahead time.Duration
	// Uncoordinated turns off counter.ClusterConfig.Coordinated (on in
	// production): every check is decided on the node it reaches, past its
	// share by the budget alone. The design limiterd had before the
	// coordinator, kept for comparison.
	Uncoordinated bool
	// Deadline is decision.Config.Deadline, how long a node waits for its
	// coordinator's answer (0: decision.DefaultDeadline). An ask whose
	// round trip, twice the latency, exceeds it gets no answer in time.
	Deadline time.Duration
	Budget   bool    // counter.ClusterConfig.Budget
	Floor    float64 // counter.ClusterConfig.BudgetFloor
	Grace    float64 // counter.ClusterConfig.DeliveryGrace
	// Tolerance is every node's counter.Config.Tolerance, the share of
	// the limit the cluster may admit past it; 0 is limiterd's default
	// (counter.DefaultConfig). Studies of what a bound other than
	// limiterd's would buy set it; the derived bound (Bound) follows.
	Tolerance float64
	// Stagger spreads the nodes' ticks: node i ticks i x Stagger / N
	// (whole ms) after each multiple of Sync. 0 ticks all nodes at once, as
	// the seed's model does; Stagger = Sync spreads them evenly over the
	// interval, as independent timers on real nodes end up.
	Stagger time.Duration
	// Dup delivers every message a second time, two sync intervals and one
	// millisecond after the first copy: after newer messages from the same
	// sender, so merges see duplicates out of order.
	Dup bool
	// Loss drops each copy of a message with this probability (0 to 1),
	// drawn from NetSeed: lost copies are counted as sent. Asks, answers
	// and releases are lost with the same probability.
	Loss float64
	// SeeAfter is how long after a node that left (Cluster.Leave) is
	// restarted its peers see it back (memberlist's gossip of the join):
	// meanwhile they send it nothing, answers to its asks included, as a
	// limiterd node has no way to reach a member it has not seen alive,
	// and owe it the full state its hello asks for. Peer j (in order, the
	// restarted node skipped) sees it j/(N-1) of SeeAfter after the
	// restart, the last one at SeeAfter. 0: every peer sees it at once.
	// Whole milliseconds.
	SeeAfter time.Duration
	// Reorder delays each copy by a further 0 to Reorder (whole ms,
	// uniform, drawn from NetSeed), so that copies overtake each other.
	Reorder time.Duration
	// NetSeed seeds Loss and Reorder.
	NetSeed uint64
	// ClockTicks ticks each node at the multiples of the sync interval on
	// its own clock, as limiterd's nodes do (cluster/node.go), rather than
	// at the same true instant: with skew, the ticks are then as far apart
	// as the clocks (modulo the interval). Stagger adds to it.
	ClockTicks bool
	// Stated makes every check state its limit (limiter.Request.Limit, as
	// Envoy's overrides and /check's limit and window do) instead of
	// naming the rule: the same limit, window and slices, counted apart
	// from the rule, each node registering the pair at its own first such
	// check and learning it from its peers before that.
	Stated bool
	// EveryTick ticks every node at every sync instant, as limiterd does,
	// instead of only at the ticks where its engine has work: after a
	// change, and where anti-entropy is due (Engine.NextAntiEntropy). It is
	// slower on sparse traces and gives the same decisions and messages
	// (TestIdleTicksChangeNothing, package internal/burst): a tick without
	// changes and without anti-entropy sends nothing, the budget forgets
	// the previous interval DeliveryGrace after a tick, and a node that
	// skipped a tick admitted nothing in the interval before it. A driver
	// that counts on the nodes' counters directly, past Check, needs it.
	EveryTick bool
	// Workers is how many goroutines run the ticks, and the deliveries,
	// that fall on one instant, each node on one goroutine (0 or 1: the
	// caller's). The order of everything else does not change, so neither
	// does any result: only the wall-clock time.
	Workers int
	// Timed measures the time each node spends in its Engine's Tick and
	// Receive, and on the asking side of its checks at the margin
	// (Node.Times): wall clock, and CPU time of the calling thread where
	// the platform tells (ThreadCPU). The goroutines that call them stay
	// on one OS thread for it.
	Timed bool
	// Routing is counter.ClusterConfig.Routing: which keys' changes go to
	// their coordinator alone (zero: RouteAuto, limiterd's default).
	Routing counter.Routing
	// EditEngine, if set, changes each node's engine configuration after
	// engine.DefaultConfig (limiterd's for UDP).
	EditEngine func(*engine.Config)
	// EditCluster, if set, changes each node's counter.ClusterConfig after
	// the fields above set theirs (the lease settings, for a study of
	// them); Bound follows it.
	EditCluster func(*counter.ClusterConfig)
	// Record, if set, is where everything node RecordNode takes in is
	// written as the simulation runs (its peers, ticks, messages, checks,
	// what the network brought back for its asks, and its decisions), so
	// that Replay can run it again on that node alone (alone.go). Finish
	// flushes it.
	Record     io.Writer
	RecordNode int
}

// request is a check of hits hits of key, as Config.Stated says.
func (c Config) request(key string, hits int64) limiter.Request {
	req := limiter.Request{Key: key, Hits: hits}
	if c.Stated {
		req.Limit = &limiter.LimitSpec{Limit: c.Limit, Window: c.Window, Slices: c.Slices}
	}
	return req
}

// DefaultConfig is the seed's cluster (HS3-HS5, HS7: 8 nodes, 600 requests
// per 60 s in 12 slices) with limiterd's defaults: the sync interval and
// budget of counter.DefaultClusterConfig, coordinated at the margin, the
// budget as the fallback, no latency, one clock.
func DefaultConfig() Config {
	cc := counter.DefaultClusterConfig("x")
	return Config{
		Nodes: 8, Limit: 600, Window: time.Minute, Slices: 12,
		Sync: cc.SyncInterval, Budget: cc.Budget, Floor: cc.BudgetFloor, Grace: cc.DeliveryGrace,
	}
}

// BudgetConfig is DefaultConfig without the coordinator: the per-node
// budget's design, which the seed tables, the charts and limitsim scale
// study.
func BudgetConfig() Config {
	c := DefaultConfig()
	c.Uncoordinated = true
	return c
}

// Validate checks what the simulator itself needs and returns every
// problem, each wrapping ErrInvalidConfig; the counter and the limiter
// check the rest when New builds the nodes.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...))
	}
	if c.RecordNode < 0 || c.RecordNode >= max(c.Nodes, 1) {
		bad("the recorded node must be one of the %d nodes, got %d", c.Nodes, c.RecordNode)
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		bad("nodes must be between 1 and %d, got %d", MaxNodes, c.Nodes)
	}
	if c.Sync < time.Millisecond || c.Sync%time.Millisecond != 0 {
		bad("sync interval must be a whole number of milliseconds, at least 1ms, got %v", c.Sync)
	}
	if c.Latency < 0 || c.Latency%time.Millisecond != 0 {
		bad("latency must be a whole, non-negative number of milliseconds, got %v", c.Latency)
	}
	if c.Stagger < 0 || c.Stagger%time.Millisecond != 0 || c.Stagger > c.Sync {
		bad("stagger must be a whole number of milliseconds between 0 and the sync interval, got %v", c.Stagger)
	}
	if c.Skew < 0 || c.Skew%time.Millisecond != 0 || c.Skew > time.Hour {
		bad("skew must be a whole number of milliseconds between 0 and 1h, got %v", c.Skew)
	}
	if c.Ahead%time.Millisecond != 0 || c.Ahead > time.Hour || c.Ahead < -time.Hour {
		bad("ahead must be a whole number of milliseconds between -1h and 1h, got %v", c.Ahead)
	}
	if !(c.Loss >= 0 && c.Loss < 1) {
		bad("loss must be a probability in [0, 1), got %v", c.Loss)
	}
	if c.SeeAfter < 0 || c.SeeAfter%time.Millisecond != 0 {
		bad("see-after must be a whole, non-negative number of milliseconds, got %v", c.SeeAfter)
	}
	if c.Reorder < 0 || c.Reorder%time.Millisecond != 0 {
		bad("reorder must be a whole, non-negative number of milliseconds, got %v", c.Reorder)
	}

	if c.Deadline < 0 || c.Deadline%time.Millisecond != 0 {
		bad("deadline must be a whole, non-negative number of milliseconds, got %v", c.Deadline)
	}
	if c.Workers < 0 {
		bad("workers must not be negative, got %d", c.Workers)
	}
	if !(c.Tolerance >= 0 && c.Tolerance <= 1) {
		bad("tolerance must be between 0 (limiterd's default) and 1, got %v", c.Tolerance)
	}
	return errors.Join(errs...)
}

// tolerance is Tolerance, or limiterd's default for 0.
func (c Config) tolerance() float64 {
	if c.Tolerance == 0 {
		return counter.DefaultConfig().Tolerance
	}
	return c.Tolerance
}

// skewOffset is node i's clock offset in ms: -Skew for node 0, +Skew for
// the last node, evenly spread in between (rounded towards zero), and
// Ahead more for node 0.
func (c Config) skewOffset(i int) int64 {
	var ahead int64
	if i == 0 {
		ahead = c.Ahead.Milliseconds()
	}
	if c.Nodes == 1 {
		return ahead
	}
	d := c.Skew.Milliseconds()
	return ahead + (-d*int64(c.Nodes-1)+2*d*int64(i))/int64(c.Nodes-1)
}

// newCounter returns a node's counter, limiterd's defaults with the
// simulation's cluster settings.
func (c Config) newCounter(name string) (*counter.Counter, error) {
	cfg := counter.DefaultConfig()
	cfg.Tolerance = c.tolerance()
	ctr, err := counter.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := ctr.SetCluster(c.clusterConfig(name)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return ctr, nil
}

// clusterConfig is the cluster settings every node's counter runs with.
func (c Config) clusterConfig(name string) counter.ClusterConfig {
	cc := counter.DefaultClusterConfig(name)
	if c.Uncoordinated {
		cc.Coordinated = false
	}
	cc.Nodes, cc.SyncInterval, cc.Budget, cc.BudgetFloor, cc.DeliveryGrace = c.Nodes, c.Sync, c.Budget, c.Floor, c.Grace
	cc.Routing = c.Routing
	if c.EditCluster != nil {
		c.EditCluster(&cc)
	}
	return cc
}

// Bound is the worst case of the simulated limit on the simulated
// cluster, as the nodes' counters derive it (counter.BoundOf): ticks at
// one instant, delivery within the grace.
func (c Config) Bound() counter.Bound {
	return counter.BoundOf(c.tolerance(), c.clusterConfig("node-0"), c.Limit, c.Window)
}

// Shares is how the tolerance of the simulated limit is spent, as the
// nodes' counters spend it (counter.BoundOf).
func (c Config) Shares() counter.Shares { return c.Bound().Shares }

// floorDiv is Math.floor(a / b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
