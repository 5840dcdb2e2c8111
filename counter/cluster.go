package counter

import (
	"fmt"
	"math"
	"time"
)

// ClusterConfig tells a Counter that it is one node of several, each
// counting its own requests and learning the others' through Merge.
type ClusterConfig struct {
	// Self is this node's name: entries it produces carry it as Origin, and
	// entries that peers send back with it (after a restart) are its own.
	Self string
	// Nodes is how many nodes share each key's limit (this one included).
	// It divides the tolerance among the nodes' slices; SetNodes updates it
	// as membership changes. At least 1.
	Nodes int
	// SyncInterval is how often nodes exchange their changes: the blind
	// interval of the budget, and the RetryAfter of a budget denial.
	SyncInterval time.Duration
	// Budget enables the per-node budget for the blind interval: a node
	// admits at most floor + remaining/Nodes of a key that its peers may not
	// know of yet, where remaining is the room the window had before those
	// admissions. "Not known yet" is what it admitted since the last
	// AppendChanges, plus, during DeliveryGrace after it, what it admitted
	// in the interval before (sent, but maybe not merged yet).
	Budget bool
	// BudgetFloor scales the budget's floor: floor = ceil(BudgetFloor x limit
	// x SyncInterval x (1 + DeliveryGrace) / window). 1 is the most a client at
	// its limit rate sends in that span, so such a client never meets the
	// budget even when all its requests reach one node.
	BudgetFloor float64
	// DeliveryGrace is how long after a tick a node assumes its message may
	// still be on its way, as a share of SyncInterval (default 0.25: 50 ms
	// of 200 ms; far above a LAN's delivery time).
	DeliveryGrace float64
	// TailShare is the part of Tolerance that slices may hide (the rest is
	// left to the blind interval). Each node's slices get TailShare x
	// Tolerance x limit / Nodes.
	TailShare float64
	// HotShare selects the keys AppendHot returns: those whose window holds
	// at least this share of their limit (default 0.5), where a lost sync
	// message could change a decision. The counter notes a key when a local
	// request or a merge brings it there, so AppendHot visits only those.
	HotShare float64
	// Coordinated makes the key's coordinator decide at the margin (SPEC,
	// "Both halves at once"): a node admits alone only what fits its blind
	// share of the key (Blind) and, past it, Allow returns
	// Decision.Coordinate instead of applying the budget; the budget is then
	// the fallback (AllowFallback) for when the coordinator cannot be
	// reached. Default true.
	Coordinated bool
	// LeaseShare is the part of each key's blind pool (the tolerance left
	// after the slices' tails: Tolerance·L − N·T) that the key's
	// coordinator lends out as leases instead of splitting it evenly as
	// blind shares: a node that keeps asking about a key is lent up to
	// floor(LeaseShare·pool) hits of it, minus what other nodes hold, to
	// decide locally for LeaseTime (lease.go). The blind share is what is
	// left, split among the nodes. 0: no leases. Default 0.75.
	LeaseShare float64
	// LeaseTime is how long a node may decide a key locally on a lease
	// from its coordinator, counted from the check that asked for it.
	// Default 1s. Must be positive when LeaseShare is.
	LeaseTime time.Duration
}

// DefaultClusterConfig returns the defaults the limiterd cluster runs with.
func DefaultClusterConfig(self string) ClusterConfig {
	return ClusterConfig{Self: self, Nodes: 1, SyncInterval: 200 * time.Millisecond, DeliveryGrace: 0.25, Budget: true, BudgetFloor: 1, TailShare: 0.3, HotShare: 0.5, Coordinated: true, LeaseShare: 0.6, LeaseTime: time.Second}
}

// Validate reports the first invalid field, wrapping ErrInvalidConfig.
func (cc ClusterConfig) Validate() error {
	switch {
	case cc.Self == "":
		return fmt.Errorf("%w: cluster Self must name this node", ErrInvalidConfig)
	case cc.Nodes < 1 || cc.Nodes > math.MaxUint16:
		return fmt.Errorf("%w: cluster Nodes must be between 1 and 65535, got %d", ErrInvalidConfig, cc.Nodes)
	case cc.SyncInterval <= 0:
		return fmt.Errorf("%w: cluster SyncInterval must be positive, got %v", ErrInvalidConfig, cc.SyncInterval)
	case !(cc.DeliveryGrace >= 0 && cc.DeliveryGrace <= 1):
		return fmt.Errorf("%w: cluster DeliveryGrace must be between 0 and 1 (a share of SyncInterval), got %v", ErrInvalidConfig, cc.DeliveryGrace)
	case !(cc.BudgetFloor >= 0) || cc.BudgetFloor > 1e6:
		return fmt.Errorf("%w: cluster BudgetFloor must be between 0 and 1e6, got %v", ErrInvalidConfig, cc.BudgetFloor)
	case !(cc.TailShare >= 0 && cc.TailShare <= 1):
		return fmt.Errorf("%w: cluster TailShare must be between 0 and 1, got %v", ErrInvalidConfig, cc.TailShare)
	case !(cc.HotShare >= 0 && cc.HotShare <= 1):
		return fmt.Errorf("%w: cluster HotShare must be between 0 and 1, got %v", ErrInvalidConfig, cc.HotShare)
	case !(cc.LeaseShare >= 0 && cc.LeaseShare <= 1):
		return fmt.Errorf("%w: cluster LeaseShare must be between 0 and 1, got %v", ErrInvalidConfig, cc.LeaseShare)
	case cc.LeaseShare > 0 && (cc.LeaseTime <= 0 || cc.LeaseTime > MaxWindow):
		return fmt.Errorf("%w: cluster LeaseTime must be positive (and at most %v) when LeaseShare is, got %v", ErrInvalidConfig, MaxWindow, cc.LeaseTime)
	}
	return nil
}

// clusterState is an immutable snapshot of ClusterConfig, swapped atomically.
type clusterState struct {
	ClusterConfig
	syncInterval time.Duration
	graceMs      int64
	tailPPM      int64 // TailShare x Tolerance / Nodes, in parts per million
}

// SetCluster switches the Counter to cluster mode (or updates it): local
// changes are tracked for AppendChanges, the tolerance is shared among
// cc.Nodes, and the budget applies if enabled. Single-node mode has no
// change tracking, so a Counter nobody syncs does not accumulate it.
func (c *Counter) SetCluster(cc ClusterConfig) error {
	if err := cc.Validate(); err != nil {
		return err
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if c.names[0] != "" && c.names[0] != cc.Self {
		return fmt.Errorf("%w: cluster Self is %q already, cannot become %q", ErrInvalidConfig, c.names[0], cc.Self)
	}
	c.names[0] = cc.Self
	c.cluster.Store(&clusterState{
		ClusterConfig: cc,
		syncInterval:  cc.SyncInterval,
		graceMs:       int64(cc.DeliveryGrace * float64(cc.SyncInterval.Milliseconds())),
		tailPPM:       int64(cc.TailShare*float64(c.tolPPM)) / int64(cc.Nodes),
	})
	return nil
}

// SetNodes updates how many nodes share each limit; a no-op in single-node mode.
func (c *Counter) SetNodes(n int) error {
	cs := c.cluster.Load()
	if cs == nil {
		return nil
	}
	cc := cs.ClusterConfig
	cc.Nodes = n
	return c.SetCluster(cc)
}

// maxTail is this node's share of the slice tolerance for a limit of max.
func (cs *clusterState) maxTail(max, tolPPM int64) int64 {
	if cs.Nodes == 1 {
		return max * tolPPM / 1e6
	}
	return max * cs.tailPPM / 1e6
}

// coordinated reports whether the coordinator decides at the margin: a
// cluster of more than one node with Coordinated set. Safe on nil.
func (cs *clusterState) coordinated() bool {
	return cs != nil && cs.Coordinated && cs.Nodes > 1
}

// pool is the part of the tolerance of a limit of max that the slices'
// tails leave: what blind shares and leases share.
func (cs *clusterState) pool(limit, tolPPM int64) int64 {
	return max(0, limit*tolPPM/1e6-int64(cs.Nodes)*cs.maxTail(limit, tolPPM))
}

// leaseCap is the most hits of one key the coordinator lends out at once
// (LeaseShare of the pool); 0 without coordination.
func (cs *clusterState) leaseCap(max, tolPPM int64) int64 {
	if !cs.coordinated() {
		return 0
	}
	return int64(cs.LeaseShare * float64(cs.pool(max, tolPPM)))
}

// blind is a node's blind share of a limit of max: what it may admit of one
// key that no other node knows of yet. All N nodes' blind admissions, the
// leases out and their slices' hidden tails (N·T) together stay within
// the tolerance: N·blind + leases + N·T <= Tolerance·max. Below that the
// coordinator decides.
func (cs *clusterState) blind(max, tolPPM int64) int64 {
	return (cs.pool(max, tolPPM) - cs.leaseCap(max, tolPPM)) / int64(cs.Nodes)
}

// grantTTLMs is how long a coordinator counts a grant that the merged
// slices do not show yet: the asker counts it within its deadline, sends
// it at its next tick and the message arrives within the grace, so after
// two intervals and the grace the merged view holds it (or the asker never
// counted it: its answer was lost and its fallback said no).
func (cs *clusterState) grantTTLMs() int64 {
	return 2*cs.syncInterval.Milliseconds() + cs.graceMs
}

// withinBudget reports whether hits more local requests fit the budget of
// a key that counts count, unacked of them local and maybe unknown to peers.
func (cs *clusterState) withinBudget(l Limit, count, unacked, hits int64) bool {
	if !cs.Budget || cs.Nodes == 1 {
		return true
	}
	floor := cs.floor(l.max, l.windowMs)
	share := (l.max - (count - unacked)) / int64(cs.Nodes)
	// With nothing unacknowledged a request always fits (the window has
	// room): the budget must not starve a node whose share rounds to nothing.
	return unacked == 0 || unacked+hits <= floor+share
}

// Shares is how one key's tolerance is spent in a cluster, for a limit:
// what each node's slices may hide (Tail), what each node may admit that
// no other node knows of yet (Blind), and what the key's coordinator
// lends out as leases at most, all nodes together (Leases). See doc.go,
// "Coordination at the margin"; WorstCase adds them up.
type Shares struct {
	Tail, Blind, Leases int64
}

// Shares returns how the tolerance of a limit of max is spent with the
// current cluster settings (single node: all of it is the tail).
func (c *Counter) Shares(max int64) Shares {
	cs := c.cluster.Load()
	if cs == nil || cs.Nodes == 1 {
		return Shares{Tail: max * c.tolPPM / 1e6}
	}
	sh := Shares{Tail: cs.maxTail(max, c.tolPPM)}
	if cs.coordinated() {
		sh.Blind, sh.Leases = cs.blind(max, c.tolPPM), cs.leaseCap(max, c.tolPPM)
	}
	return sh
}

// WorstCase returns the most requests of one key that this Counter, with
// its current cluster settings, can accept in any interval of length window
// for a limit of max: L + T on a single node (doc.go), and in cluster mode
// the bound derived in docs/blind-interval.md for ticks at one instant and
// delivery within the grace: L + N·b + N·T with coordination (b the blind
// share, Blind; what a healthy cluster keeps, see doc.go), and without it
// L + N·f + N·T with the budget (L − 1 + N + N·T when its floor f is 0) and
// N·(L + T) without. Divided by max it is the
// ratio that 1 + Tolerance promises; with windows short against the sync
// interval, or limits small against the number of nodes, it exceeds it.
func (c *Counter) WorstCase(max int64, window time.Duration) int64 {
	cs := c.cluster.Load()
	if cs == nil || cs.Nodes == 1 {
		return max + max*c.tolPPM/1e6
	}
	n := int64(cs.Nodes)
	sh := c.Shares(max)
	tail := n * sh.Tail
	if cs.Coordinated {
		return max + n*sh.Blind + sh.Leases + tail
	}
	if !cs.Budget {
		return n*max + tail
	}
	floor := cs.floor(max, window.Milliseconds())
	if floor == 0 {
		return max - 1 + n + tail
	}
	return max + n*floor + tail
}

// floor is the budget's floor f for a limit of max per windowMs: what a
// client at its limit rate sends in one sync interval and its grace, times
// BudgetFloor.
func (cs *clusterState) floor(max, windowMs int64) int64 {
	span := float64(cs.syncInterval.Milliseconds() + cs.graceMs)
	return int64(math.Ceil(cs.BudgetFloor * float64(max) * span / float64(windowMs)))
}

// Cluster returns the cluster settings in force and true, or false in
// single-node mode. The cluster layer reads its sync interval here, so the
// interval has one source of truth.
func (c *Counter) Cluster() (ClusterConfig, bool) {
	cs := c.cluster.Load()
	if cs == nil {
		return ClusterConfig{}, false
	}
	return cs.ClusterConfig, true
}
