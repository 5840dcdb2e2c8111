package nodecost

import "math/rand/v2"

// spreadStream is the PCG stream of Random's draw, apart from the keys'.
const spreadStream = 0x73707264

// picker picks each check's node as Config.Spread says.
type picker struct {
	n   int
	rng *rand.Rand // nil: round robin
}

func newPicker(s Spread, n int, seed uint64) *picker {
	p := &picker{n: n}
	if s == Random {
		p.rng = rand.New(rand.NewPCG(seed, spreadStream))
	}
	return p
}

// node is the node of check i. cut, unless negative, is a silent node
// whose share goes to the others, evenly: in turn round robin, drawn
// among them at random.
func (p *picker) node(i int64, cut int) int {
	if p.rng == nil {
		node := int(i % int64(p.n))
		if node == cut {
			node = (cut + 1 + int(i/int64(p.n)%int64(p.n-1))) % p.n
		}
		return node
	}
	if cut < 0 {
		return p.rng.IntN(p.n)
	}
	return (cut + 1 + p.rng.IntN(p.n-1)) % p.n
}
