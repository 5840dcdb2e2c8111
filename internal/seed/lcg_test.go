package seed

import "testing"

// TestLCG pins the generator to values computed independently (Python's
// integers: s = (s*1103515245 + 12345) % 2**32, node = s*8 // 2**32).
func TestLCG(t *testing.T) {
	g := NewLCG(LCGSeed)
	for i, want := range []struct {
		s    uint32
		node int
	}{{939862827, 1}, {3147606920, 5}, {3509102881, 6}, {2724086086, 5}, {472469255, 0}} {
		if node := g.Node(8); node != want.node || g.State() != want.s {
			t.Errorf("draw %d: state %d node %d, want %d and %d", i, g.State(), node, want.s, want.node)
		}
	}
	var zero LCG
	if zero.Next(); zero.State() != 12345 {
		t.Errorf("the zero LCG's first state %d, want 12345", zero.State())
	}
}
