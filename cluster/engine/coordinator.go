package engine

import "hash/fnv"

// CoordinatorOf returns the member that coordinates key: the one with the
// highest rendezvous score of (member, key), so every node that knows the
// same members picks the same one, and a member's departure moves only the
// keys it coordinated (each to its runner-up). "" when members is empty.
// The hash is fixed (FNV-1a, then a 64-bit mix), not seeded per process:
// nodes must agree.
func CoordinatorOf(key string, members []string) string {
	kh := fnv64(key)
	best, bestScore := "", uint64(0)
	for _, m := range members {
		if s := score(kh, fnv64(m)); best == "" || beats(s, m, bestScore, best) {
			best, bestScore = m, s
		}
	}
	return best
}

// score is the rendezvous score of the key hashed kh on the member whose
// name hashed nh.
func score(kh, nh uint64) uint64 { return mix64(kh ^ nh) }

// beats reports whether the member name with score s ranks above the one
// named best with bestScore: the higher score, and on a tie the smaller
// name, so that every node ranks members alike.
func beats(s uint64, name string, bestScore uint64, best string) bool {
	return s > bestScore || s == bestScore && name < best
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// mix64 is splitmix64's finalizer: it spreads the bits of x so that the
// scores of one key over different members are independent.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
