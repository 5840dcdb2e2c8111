package engine

import (
	"cmp"
	"math/bits"
	"slices"
)

// ringPoints is how many points each member has on the ring. More points
// spread the keys more evenly (the busiest of 8 members gets about 1.2
// times the mean with 64) at 12 bytes a point per node.
const ringPoints = 64

// ring is the consistent-hash ring of a set of members: each member has
// ringPoints points, and a key belongs to the owner of the first point at
// or after the key's own, clockwise. A lookup is a binary search, so the
// cost of finding a coordinator grows with the logarithm of the cluster's
// size, not with its size as rendezvous hashing's does: every synced
// entry of a routed key and every ask looks one up. A member's departure
// moves only its keys, each to the next member clockwise (its runner-up),
// and a join takes about 1/N of the keys. Immutable once built.
//
// A lookup does not binary-search the points: at 1,000 members they are
// 64,000 (512 KB), and a search's fourteen or so dependent reads, each
// likely a cache miss once the ring is out of cache, cost more than the
// rest of an ask (BENCHMARKS.md, issue 20). starts cuts the hash space
// into 2^k equal buckets, 2^k between half the points and all of them,
// and holds the first point of each: a lookup reads its bucket's start
// and then one or two points, two misses at most.
type ring struct {
	points []uint64 // sorted
	owners []int32  // owners[i] is the member of points[i], an index of names
	names  []string // sorted
	starts []int32  // starts[b]: the first point at or after bucket b's start, b = at >> shift
	shift  uint     // 64 − k
}

// newRing builds the ring of members (duplicates are kept once).
func newRing(members []string) *ring {
	names := slices.Clone(members)
	slices.Sort(names)
	names = slices.Compact(names)
	type point struct {
		at    uint64
		owner int32
	}
	ps := make([]point, 0, len(names)*ringPoints)
	for i, n := range names {
		h := fnv64(n)
		for v := range uint64(ringPoints) {
			ps = append(ps, point{mix64(h + v*0x9e3779b97f4a7c15), int32(i)})
		}
	}
	// Ties (two members on one point) go to the smaller name, on every node.
	slices.SortFunc(ps, func(a, b point) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.owner, b.owner)) })
	r := &ring{points: make([]uint64, len(ps)), owners: make([]int32, len(ps)), names: names}
	for i, p := range ps {
		r.points[i], r.owners[i] = p.at, p.owner
	}
	r.index()
	return r
}

// index builds r.starts from r.points.
func (r *ring) index() {
	k := max(bits.Len(uint(len(r.points)))-1, 0)
	r.shift = uint(64 - k)
	r.starts = make([]int32, 1<<k)
	i := 0
	for b := range r.starts {
		lo := uint64(b) << r.shift // 0 for every b when k = 0: shifts of 64 give 0
		for i < len(r.points) && r.points[i] < lo {
			i++
		}
		r.starts[b] = int32(i)
	}
}

// search returns the index of the first point at or after at, or
// len(r.points) when there is none (the ring wraps to point 0): what
// slices.BinarySearch(r.points, at) returns, read from at's bucket.
func (r *ring) search(at uint64) int {
	i := int(r.starts[at>>r.shift&uint64(len(r.starts)-1)])
	for i < len(r.points) && r.points[i] < at {
		i++
	}
	return i
}

// keyPoint is where key lies on the ring.
func keyPoint(key string) uint64 { return mix64(fnv64(key)) }

// walk calls visit with the members in the order they would take key on,
// the coordinator first, each once, until visit returns false or every
// member was visited.
func (r *ring) walk(key string, visit func(name string) bool) {
	if len(r.names) == 0 {
		return
	}
	i := r.search(keyPoint(key))
	var seen []int32 // few: a walk stops at the first member that can take the key
	for range r.points {
		if i == len(r.points) {
			i = 0
		}
		o := r.owners[i]
		i++
		if slices.Contains(seen, o) {
			continue
		}
		if !visit(r.names[o]) || len(seen)+1 == len(r.names) {
			return
		}
		seen = append(seen, o)
	}
}

// first returns key's coordinator on r, "" when r has no member.
func (r *ring) first(key string) string {
	if len(r.points) == 0 {
		return ""
	}
	i := r.search(keyPoint(key))
	if i == len(r.points) {
		i = 0
	}
	return r.names[r.owners[i]]
}

// CoordinatorOf returns the member that coordinates key: the owner of the
// first point at or after the key's on the ring of members (consistent
// hashing, ringPoints points a member), so every node that knows the same
// members picks the same one, and a member's departure moves only the
// keys it coordinated, each to its runner-up. "" when members is empty.
// The hash is fixed (FNV-1a, then a 64-bit mix), not seeded per process:
// nodes must agree. It builds the ring: an Engine keeps its own.
func CoordinatorOf(key string, members []string) string {
	return newRing(members).first(key)
}

// fnv64 is FNV-1a of s, without allocating.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is splitmix64's finalizer: it spreads the bits of x, so that a
// member's points, and keys that differ in a byte, land far apart.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
