package counter

import (
	"fmt"
	"math"
	"time"
)

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
	c.cluster.Store(newClusterState(cc, c.tolPPM))
	return nil
}

// newClusterState is the snapshot of a valid cc for a tolerance of tolPPM.
func newClusterState(cc ClusterConfig, tolPPM int64) *clusterState {
	return &clusterState{
		ClusterConfig: cc,
		syncInterval:  cc.SyncInterval,
		graceMs:       int64(cc.DeliveryGrace * float64(cc.SyncInterval.Milliseconds())),
		tailPPM:       int64(cc.TailShare*float64(tolPPM)) / int64(cc.Nodes),
	}
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
	if cs.routed(max, tolPPM) {
		return 0 // no node counts its peers' admissions: none may admit blind
	}
	return cs.split(max, tolPPM)
}

// split is the pool's part each node gets, less the leases: its blind
// share unless the limit is routed.
func (cs *clusterState) split(max, tolPPM int64) int64 {
	return (cs.pool(max, tolPPM) - cs.leaseCap(max, tolPPM)) / int64(cs.Nodes)
}

// routed reports whether the changes of a limit of max go to its keys'
// coordinators alone (ClusterConfig.Routing): never without a
// coordinator, always with RouteAlways, and with RouteAuto on more than
// MeshNodes nodes when the limit's split leaves each node a blind share of
// at most 1, which routing then takes (blind). One unit an interval is not
// worth every peer merging every change of the limit; and with the split
// of LeaseShare 0.46 a limit of 600 a minute keeps one on 25 to 33 nodes,
// where LeaseShare 0.6's left none and it was routed from 25 nodes on. A
// family's registration (max MaxLimit) is broadcast under RouteAuto:
// each call states its own max.
func (cs *clusterState) routed(max, tolPPM int64) bool {
	switch {
	case !cs.coordinated() || cs.Routing == RouteNever:
		return false
	case cs.Routing == RouteAlways:
		return true
	}
	return cs.Nodes > cs.MeshNodes && cs.split(max, tolPPM) <= 1
}

// Routed returns the identities (Entry.Limit) of the registered limits
// whose changes go to their keys' coordinators alone, with the settings in
// force (ClusterConfig.Routing); nil when none is. It changes with the
// number of nodes and the registrations, and is cached between changes:
// the cluster engine reads it at every tick and every ask. The map is
// shared: callers must not modify it.
func (c *Counter) Routed() map[string]bool {
	cs := c.cluster.Load()
	if !cs.coordinated() || cs.Routing == RouteNever {
		return nil
	}
	gen := c.regGen.Load()
	if r := c.routed.Load(); r != nil && r.cs == cs && r.gen == gen {
		return r.set
	}
	ids, maxes, _ := c.snapshotNames()
	var set map[string]bool
	for i, id := range ids {
		if cs.routed(maxes[i], c.tolPPM) {
			if set == nil {
				set = make(map[string]bool)
			}
			set[id] = true
		}
	}
	c.routed.Store(&routedSet{cs: cs, gen: gen, set: set})
	return set
}

// routedSet is Routed's answer for one cluster state and registry
// generation.
type routedSet struct {
	cs  *clusterState
	gen uint64
	set map[string]bool
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
// Of a routed limit (ClusterConfig.Routing) count is only this node's: the
// others' admissions went to the key's coordinator, not here. The budget
// then assumes none of the window's room is free and keeps to its floor,
// which a client at its limit rate never passes (BudgetFloor): else each
// node would take a share of a room the others may have used, every
// interval.
func (cs *clusterState) withinBudget(l Limit, count, unacked, hits, tolPPM int64) bool {
	if !cs.Budget || cs.Nodes == 1 {
		return true
	}
	floor := cs.floor(l.max, l.windowMs)
	share := (l.max - (count - unacked)) / int64(cs.Nodes)
	if cs.routed(l.max, tolPPM) {
		share = 0
	}
	// With nothing unacknowledged a request always fits (the window has
	// room): the budget must not starve a node whose share rounds to nothing.
	return unacked == 0 || unacked+hits <= floor+share
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
