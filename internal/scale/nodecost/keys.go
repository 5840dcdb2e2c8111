package nodecost

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// keys draws the load's keys: ranks 0 to n-1, rank k with probability
// proportional to (1+k)^-s, from a PCG seeded with the run's seed, so the
// same seed draws the same keys in the same order.
type keys struct {
	z     *rand.Zipf
	n     int
	names []string // the names of the judged ranks, built once
	buf   []byte
}

func newKeys(n int, s float64, seed uint64, judged int) *keys {
	k := &keys{z: rand.NewZipf(rand.New(rand.NewPCG(seed, 0x7a697066)), s, 1, uint64(n-1)), n: n}
	k.names = make([]string, min(judged, n))
	for r := range k.names {
		k.names[r] = keyName(nil, r)
	}
	return k
}

// next draws a rank.
func (k *keys) next() int { return int(k.z.Uint64()) }

// name is rank r's key: a new string unless r is judged (the counter keeps
// the strings of the keys it tracks, so the driver does not).
func (k *keys) name(r int) string {
	if r < len(k.names) {
		return k.names[r]
	}
	k.buf = appendKeyName(k.buf[:0], r)
	return string(k.buf)
}

// keyName is rank r's key, "client-" and ten digits: 17 bytes, as long
// for every rank of a 1,000-node run.
func keyName(b []byte, r int) string { return string(appendKeyName(b, r)) }

func appendKeyName(b []byte, r int) []byte {
	return strconv.AppendInt(append(b, "client-"...), 1_000_000_000+int64(r), 10)
}

// zipfMass returns the probability of each of the first m ranks of n
// under exponent s: (1+k)^-s over the sum of all n terms.
func zipfMass(n int, s float64, m int) []float64 {
	var sum float64
	for k := n - 1; k >= 0; k-- { // smallest terms first: less rounding
		sum += math.Pow(1+float64(k), -s)
	}
	p := make([]float64, min(m, n))
	for k := range p {
		p[k] = math.Pow(1+float64(k), -s) / sum
	}
	return p
}

// judgedRanks is how many of the hottest ranks are judged: cfg.Judged,
// or with 0 every rank whose expected checks in a window reach a quarter
// of the limit (checks a second x window x mass >= limit / 4).
func judgedRanks(cfg Config, n int, limit int64, windowS float64) int {
	if cfg.Judged > 0 {
		return min(cfg.Judged, cfg.KeysPerNode*n)
	}
	rate := float64(cfg.RatePerNode) * float64(n)
	thr := float64(limit) / 4 / (rate * windowS)
	total := cfg.KeysPerNode * n
	// Rank r's mass, norm x (1+r)^-s, reaches thr for 1+r up to
	// (norm/thr)^(1/s).
	norm := zipfMass(total, cfg.Zipf, 1)[0]
	return min(total, int(math.Pow(norm/thr, 1/cfg.Zipf)))
}
