package counter

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config configures a Counter. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Shards is the number of independently locked partitions of the key
	// space. A power of two; more shards mean less lock contention between
	// goroutines checking different keys. Default 64.
	Shards int
	// MaxKeys caps how many (limit, key) pairs are tracked at once, which caps
	// memory (about 120 bytes per pair at HS1 traffic, see BENCHMARKS.md).
	// At the cap a new key is allowed without being counted (see doc.go).
	// Default 1,000,000.
	MaxKeys int
	// Tolerance is the share of a limit by which a window-long interval may
	// exceed it (NFR1: 0.1 means at most 1.1 x the limit). It sets how many
	// requests a slice may hold after its first instant. Default 0.1.
	Tolerance float64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{Shards: 64, MaxKeys: 1_000_000, Tolerance: 0.1}
}

// Validate reports every invalid field, each error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs fieldErrors
	errs.check(c.Shards >= 1 && c.Shards <= 1<<16 && c.Shards&(c.Shards-1) == 0, "Shards must be a power of two between 1 and 65536, got %d", c.Shards)
	errs.check(c.MaxKeys >= 1, "MaxKeys must be at least 1, got %d", c.MaxKeys)
	errs.check(c.Tolerance >= 0 && c.Tolerance <= 1, "Tolerance must be between 0 and 1, got %v", c.Tolerance)
	return errors.Join(errs...)
}

// fieldErrors collects what a Validate finds wrong, so that it reports
// every problem at once.
type fieldErrors []error

// check records the problem format describes, wrapping ErrInvalidConfig,
// unless ok.
func (e *fieldErrors) check(ok bool, format string, args ...any) {
	if !ok {
		*e = append(*e, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
}

// tolerancePPM is a Tolerance in parts per million, the unit the counter
// computes its shares in: every share of the tolerance is derived from it,
// so that BoundOf and the Counter round alike.
func tolerancePPM(tolerance float64) int64 { return int64(tolerance*1e6 + 0.5) }

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
	// Tolerance x limit / Nodes. Default 0.3.
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
	// floor(LeaseShare·pool) hits of it, minus what other nodes hold and
	// no more than an equal share with them, to decide locally for
	// LeaseTime (lease.go). The blind share is what is
	// left, split among the nodes. 0: no leases. Default 0.46: the least
	// share that keeps a client sending its whole limit of 600 a minute to
	// one node at once within 5 % asks on 8 nodes (29 of 600; Λ = 20 of a
	// pool of 44), the rest a blind share of 3 (TestLeaseTargets;
	// BENCHMARKS.md, "a lease share of 0.46").
	LeaseShare float64
	// LeaseTime is how long a node may decide a key locally on a lease
	// from its coordinator, counted from the check that asked for it, for
	// a limit every node merges: such a lease bounds what it admitted
	// that is not yet acknowledged, not what it admits in all, so its life
	// sets only how often it is renewed, each renewal a check that waits
	// on the network (lease.go). Default 3s. Must be positive when
	// LeaseShare is. A node uses a lease at most about 65 s after asking
	// for it, whatever this says (the coordinator counts it the longer).
	LeaseTime time.Duration
	// RoutedLeaseTime is LeaseTime for a routed limit's lease, which is
	// spent hit by hit (its holder sees none of its peers' admissions), so
	// that its size is what its holder admits in that long. Default 1s.
	// (With 3 s, before it was set apart from LeaseTime, a routed limit's
	// fault test under loss once measured 1.98 × the limit: within that
	// scenario's bound of two coordinators, docs/faults.md, but above any
	// run at 1 s; not tried again.) A coordinator counts every lease it
	// lends for the longer of the two.
	RoutedLeaseTime time.Duration
	// Routing says which keys' changes go to every peer and which to the
	// key's coordinator alone (Counter.Routed; the cluster engine sends
	// them). RouteAuto, the default: on more than MeshNodes nodes, a limit
	// whose split leaves each node a blind share of at most 1 is routed
	// and given none, so that no node admits any of it without asking the
	// coordinator and no node but the coordinator needs its peers' counts
	// of it; every other limit is broadcast,
	// because its blind shares are only safe while each node counts its
	// peers' admissions. RouteNever broadcasts every limit (limiterd
	// before routing); RouteAlways routes every limit and gives no node a
	// blind share (the pool not lent as leases is then unused). Routing
	// needs Coordinated: without a coordinator every limit is broadcast.
	Routing Routing
	// MeshNodes is the largest cluster on which RouteAuto broadcasts every
	// limit. Broadcast costs each node a merge per peer of every change,
	// which grows with the cluster; but every node then also judges each
	// check against its own complete count before asking, which keeps the
	// bounds under faults that routing loses: a one-way cut and random
	// loss (worst window 1.90 x the limit routed, against the budget's
	// 1.32 broadcast, in the 8-node lab of e2e/faults) and a clock 200 ms
	// ahead on the coordinator (1.18 against 1.04). Default 24: up to that
	// size a limit of 600 a minute keeps a blind share anyway.
	MeshNodes int
}

// Routing is ClusterConfig.Routing.
type Routing uint8

// The routings of ClusterConfig.Routing.
const (
	// RouteAuto routes the limits with no blind share, broadcasts the rest.
	RouteAuto Routing = iota
	// RouteNever broadcasts every limit to every peer.
	RouteNever
	// RouteAlways routes every limit to its keys' coordinators, with no
	// blind share.
	RouteAlways
)

// String returns the routing's name, as limiterd's -sync-routing flag
// spells it.
func (r Routing) String() string {
	switch r {
	case RouteAuto:
		return "auto"
	case RouteNever:
		return "never"
	case RouteAlways:
		return "always"
	}
	return fmt.Sprintf("routing(%d)", uint8(r))
}

// MarshalText returns String's spelling (encoding.TextMarshaler).
func (r Routing) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText sets r to the Routing that String spells text
// (encoding.TextUnmarshaler: flag.TextVar reads one).
func (r *Routing) UnmarshalText(text []byte) error {
	for _, v := range []Routing{RouteAuto, RouteNever, RouteAlways} {
		if v.String() == string(text) {
			*r = v
			return nil
		}
	}
	return fmt.Errorf("%w: routing must be auto, never or always, got %q", ErrInvalidConfig, text)
}

// DefaultClusterConfig returns the defaults the limiterd cluster runs with:
// the ones documented on ClusterConfig, one node, a 200 ms sync interval
// and the budget on with a floor of 1.
func DefaultClusterConfig(self string) ClusterConfig {
	return ClusterConfig{Self: self, Nodes: 1, SyncInterval: 200 * time.Millisecond, DeliveryGrace: 0.25, Budget: true, BudgetFloor: 1, TailShare: 0.3, HotShare: 0.5, Coordinated: true, LeaseShare: 0.46, LeaseTime: 3 * time.Second, RoutedLeaseTime: time.Second, MeshNodes: 24}
}

// Validate reports every invalid field, each error wrapping ErrInvalidConfig.
func (cc ClusterConfig) Validate() error {
	var errs fieldErrors
	bad := func(ok bool, format string, args ...any) { errs.check(ok, "cluster "+format, args...) }
	bad(cc.Self != "", "Self must name this node")
	bad(cc.Nodes >= 1 && cc.Nodes <= math.MaxUint16, "Nodes must be between 1 and 65535, got %d", cc.Nodes)
	bad(cc.SyncInterval > 0, "SyncInterval must be positive, got %v", cc.SyncInterval)
	bad(cc.DeliveryGrace >= 0 && cc.DeliveryGrace <= 1, "DeliveryGrace must be between 0 and 1 (a share of SyncInterval), got %v", cc.DeliveryGrace)
	bad(cc.BudgetFloor >= 0 && cc.BudgetFloor <= 1e6, "BudgetFloor must be between 0 and 1e6, got %v", cc.BudgetFloor)
	bad(cc.TailShare >= 0 && cc.TailShare <= 1, "TailShare must be between 0 and 1, got %v", cc.TailShare)
	bad(cc.HotShare >= 0 && cc.HotShare <= 1, "HotShare must be between 0 and 1, got %v", cc.HotShare)
	bad(cc.LeaseShare >= 0 && cc.LeaseShare <= 1, "LeaseShare must be between 0 and 1, got %v", cc.LeaseShare)
	bad(!(cc.LeaseShare > 0) || cc.LeaseTime > 0 && cc.LeaseTime <= MaxWindow,
		"LeaseTime must be positive (and at most %v) when LeaseShare is, got %v", MaxWindow, cc.LeaseTime)
	bad(!(cc.LeaseShare > 0) || cc.RoutedLeaseTime > 0 && cc.RoutedLeaseTime <= MaxWindow,
		"RoutedLeaseTime must be positive (and at most %v) when LeaseShare is, got %v", MaxWindow, cc.RoutedLeaseTime)
	bad(cc.Routing <= RouteAlways, "Routing must be RouteAuto, RouteNever or RouteAlways, got %v", cc.Routing)
	bad(cc.MeshNodes >= 0, "MeshNodes must not be negative, got %d", cc.MeshNodes)
	return errors.Join(errs...)
}
