package clustersim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMaxInWindow(t *testing.T) {
	tests := []struct {
		name   string
		at     []int64
		window int64
		want   int
	}{
		{"empty", nil, 10, 0},
		{"one", []int64{5}, 10, 1},
		{"same instant", []int64{3, 3, 3}, 1, 3},
		{"half-open: t+window is outside", []int64{0, 10}, 10, 1},
		{"just inside", []int64{0, 9}, 10, 2},
		{"best window in the middle", []int64{0, 20, 21, 22, 29, 30, 45}, 10, 4},
		{"window of 1 ms", []int64{0, 0, 1, 1, 1, 2}, 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxInWindow(tt.at, tt.window); got != tt.want {
				t.Errorf("MaxInWindow(%v, %d) = %d, want %d", tt.at, tt.window, got, tt.want)
			}
		})
	}
}

// TestMaxInWindowBruteForce compares the two pointers with counting every
// interval [at[j], at[j]+window) directly.
func TestMaxInWindowBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		at := make([]int64, rng.IntN(40))
		for i := range at {
			at[i] = rng.Int64N(100)
		}
		slices.Sort(at)
		window := 1 + rng.Int64N(30)
		want := 0
		for _, a := range at {
			n := 0
			for _, b := range at {
				if b >= a && b < a+window {
					n++
				}
			}
			want = max(want, n)
		}
		if got := MaxInWindow(at, window); got != want {
			t.Fatalf("MaxInWindow(%v, %d) = %d, brute force %d", at, window, got, want)
		}
	}
}
