package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCoordinatorOf: the choice is the same whatever the order of the
// members, spreads keys evenly, and a departure moves only the departed
// member's keys.
func TestCoordinatorOf(t *testing.T) {
	members := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	reversed := []string{"n7", "n6", "n5", "n4", "n3", "n2", "n1", "n0"}
	per := map[string]int{}
	const keys = 8000
	for i := range keys {
		k := fmt.Sprint("client-", i)
		c := CoordinatorOf(k, members)
		if r := CoordinatorOf(k, reversed); r != c {
			t.Fatalf("%s: %s or %s depending on order", k, c, r)
		}
		per[c]++
		if without := CoordinatorOf(k, members[:7]); c != "n7" && without != c {
			t.Fatalf("%s moved from %s to %s when n7 left", k, c, without)
		}
	}
	for m, n := range per {
		if n < keys/8*8/10 || n > keys/8*12/10 {
			t.Errorf("%s coordinates %d of %d keys, want about %d", m, n, keys, keys/8)
		}
	}
	if CoordinatorOf("k", nil) != "" {
		t.Fatal("no members: want none")
	}
}

// TestRingSearchIsBinarySearch: the bucket index finds, for any point on
// any ring size, what a binary search of the points finds, at the
// buckets' edges, on the points themselves and past the last one.
func TestRingSearchIsBinarySearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, members := range []int{0, 1, 2, 3, 7, 8, 64, 257, 1000} {
		names := make([]string, members)
		for i := range names {
			names[i] = fmt.Sprint("node-", i)
		}
		r := newRing(names)
		if n := len(r.points); n > 0 && (len(r.starts) > n || 2*len(r.starts) <= n) {
			t.Errorf("%d members: %d buckets for %d points, want between half the points and all", members, len(r.starts), n)
		}
		probes := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
		for _, p := range r.points {
			probes = append(probes, p, p-1, p+1)
		}
		for b := range r.starts {
			lo := uint64(b) << r.shift
			probes = append(probes, lo, lo-1)
		}
		for range 10000 {
			probes = append(probes, rng.Uint64())
		}
		for _, at := range probes {
			want, _ := slices.BinarySearch(r.points, at)
			if got := r.search(at); got != want {
				t.Fatalf("%d members: search(%#x) = %d, binary search %d", members, at, got, want)
			}
		}
	}
}

// BenchmarkRingFirst: a key's coordinator on rings of 8, 256 and 1,000
// members, over keys enough that the lookups do not repeat.
func BenchmarkRingFirst(b *testing.B) {
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	for _, members := range []int{8, 256, 1000} {
		names := make([]string, members)
		for i := range names {
			names[i] = fmt.Sprint("node-", i)
		}
		r := newRing(names)
		b.Run(fmt.Sprint(members), func(b *testing.B) {
			i := 0
			for b.Loop() {
				_ = r.first(keys[i&(len(keys)-1)])
				i++
			}
		})
	}
}
