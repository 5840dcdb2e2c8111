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
	// Budget enables the per-node budget for the blind interval: between two
	// AppendChanges a node admits at most max(floor, remaining/Nodes) of a
	// key, where remaining is the room the window had at the last sync.
	Budget bool
	// BudgetFloor scales the budget's floor: floor = ceil(BudgetFloor x limit
	// x SyncInterval / window). 1 is exactly what a client at its limit rate
	// sends in one interval, so such a client never meets the budget even
	// when all its requests reach one node.
	BudgetFloor float64
	// TailShare is the part of Tolerance that slices may hide (the rest is
	// left to the blind interval). Each node's slices get TailShare x
	// Tolerance x limit / Nodes.
	TailShare float64
}

// DefaultClusterConfig returns the defaults the limiterd cluster runs with.
func DefaultClusterConfig(self string) ClusterConfig {
	return ClusterConfig{Self: self, Nodes: 1, SyncInterval: 200 * time.Millisecond, Budget: true, BudgetFloor: 1, TailShare: 0.5}
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
	case !(cc.BudgetFloor >= 0) || cc.BudgetFloor > 1e6:
		return fmt.Errorf("%w: cluster BudgetFloor must be between 0 and 1e6, got %v", ErrInvalidConfig, cc.BudgetFloor)
	case !(cc.TailShare >= 0 && cc.TailShare <= 1):
		return fmt.Errorf("%w: cluster TailShare must be between 0 and 1, got %v", ErrInvalidConfig, cc.TailShare)
	}
	return nil
}

// clusterState is an immutable snapshot of ClusterConfig, swapped atomically.
type clusterState struct {
	ClusterConfig
	syncInterval time.Duration
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

// withinBudget reports whether hits more local requests fit the blind
// interval's budget of a key that counts count (pending of them local and
// not yet sent).
func (cs *clusterState) withinBudget(l Limit, count, pending, hits int64) bool {
	if !cs.Budget || cs.Nodes == 1 {
		return true
	}
	floor := int64(math.Ceil(cs.BudgetFloor * float64(l.max) * float64(cs.syncInterval.Milliseconds()) / float64(l.windowMs)))
	share := (l.max - (count - pending)) / int64(cs.Nodes)
	// The first request of an interval always fits (when the window has room):
	// a budget must not starve a node whose share rounds down to nothing.
	return pending == 0 || pending+hits <= max(floor, share)
}
