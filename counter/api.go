package counter

import (
	"errors"
	"time"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrInvalidHits is returned when hits is below 1 or above a limit.
	ErrInvalidHits = errors.New("counter: invalid hits")
	// ErrInvalidLimit is returned by (*Counter).Limit for a bad limit, window or slice count.
	ErrInvalidLimit = errors.New("counter: invalid limit")
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("counter: invalid config")
	// ErrTooManyLimits is returned when one call names more than MaxLimitsPerCall limits.
	ErrTooManyLimits = errors.New("counter: too many limits in one call")
)

// MaxLimitsPerCall bounds how many limits one Allow call may check together.
const MaxLimitsPerCall = 8

// MaxWindow is the longest window a limit may have. Slice start offsets are
// stored as uint32 milliseconds relative to a per-key base, and every live
// slice lies within one window of the newest, so a window must fit in 2^32 ms.
const MaxWindow = 30 * 24 * time.Hour

// Limit is a registered limit: "at most Max requests per Window", counted in
// slices of Window/Slices. Obtain one from (*Counter).Limit; the zero value is
// not usable. A Limit is a small value, safe to copy and to share.
type Limit struct {
	slot     uint16 // index of this limit's table in every shard
	max      int64  // the declared limit
	windowMs int64
	sliceMs  int64
	name     string
	family   bool // of a family (Family): an ask states its max (Ask.Max)
}

// Name returns the identity the limit was registered under.
func (l Limit) Name() string { return l.name }

// Max returns the declared limit (requests per window).
func (l Limit) Max() int64 { return l.max }

// WithMax returns l with max as its declared limit, sharing l's counts. A
// registration's identity is (name, window, slices) and the max is per
// call, so a caller whose limits vary by request (an override sent with
// each one) registers a triple once and derives a Limit per call, without
// taking the registry's lock. max is not checked: the caller keeps it in
// 1..MaxLimit (below 1, every Allow refuses with ErrInvalidHits).
//
// Such limits belong in a family (Family): the registry uses a
// registration's max where no call is at hand (the bound on a peer's
// slices that Merge accepts; Coordinate of an ask that states no max), and
// a family's is MaxLimit, so that Merge refuses no peer's slices whatever
// max they were counted under, while an ask of a family limit carries its
// call's max (PrepareAsk fills Ask.Max) for the coordinator to decide with.
func (l Limit) WithMax(max int64) Limit {
	l.max = max
	return l
}

// Family reports whether l is a registration of a family (Family).
func (l Limit) Family() bool { return l.family }

// Window returns the window length.
func (l Limit) Window() time.Duration { return time.Duration(l.windowMs) * time.Millisecond }

// Slices returns the number of slices the window is divided into.
func (l Limit) Slices() int { return int(l.windowMs / l.sliceMs) }

// Result is the outcome of one Allow call for one limit.
type Result struct {
	// Allowed reports whether this limit had room for the hits. The request
	// as a whole is allowed only if every limit in the call had room.
	Allowed bool
	// Limit is the declared limit.
	Limit int64
	// Count is the number of requests counted in the window before this call.
	Count int64
	// Pending is the part of Count that this node, as the key's
	// coordinator, granted and the merged slices do not show yet. A grant
	// whose answer was lost and which the asker did not count stays in it
	// until released or expired, so a denial that needs Pending to deny is
	// not remembered (RememberDenial).
	Pending int64
	// Remaining is what is left in the window after this call (never negative).
	Remaining int64
	// RetryAfter is, for a limit without room, the shortest wait after which the
	// same request fits this limit if nothing else arrives; 0 when it had room.
	RetryAfter time.Duration
	// Reset is the time until every request now counted has left the window,
	// i.e. until the full limit is available again.
	Reset time.Duration
	// Lease is, in a coordinator's answer that allowed the check, the hits
	// of the key lent to the asker to decide locally (Coordinate, Grant;
	// see ClusterConfig.LeaseShare). 0 elsewhere.
	Lease int64
	// LeaseGen is, with Lease, the number of the ask it answers (Ask.Gen).
	LeaseGen uint32
}

// Decision is the outcome of one Allow call over all of its limits.
type Decision struct {
	// Allowed reports whether every limit had room; only then were the hits counted.
	Allowed bool
	// Untracked reports that the key was not tracked because the counter is at
	// its MaxKeys cap; the request is allowed and nothing is counted (see doc.go).
	Untracked bool
	// Coordinate reports, in a coordinated cluster, that the request fits
	// the window as this node knows it but not this node's blind share:
	// nothing was counted, Allowed is false, and the key's coordinator must
	// decide (see Counter.Allow). Never set together with a denial.
	Coordinate bool
	// Leased reports that the request was allowed here, past this node's
	// blind share, on a lease the key's coordinator lent it
	// (ClusterConfig.LeaseShare): without the network.
	Leased bool
	// RetryAfter is the longest RetryAfter over the limits without room.
	RetryAfter time.Duration
}
