package seedstudy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
)

func TestFloorDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{0, 5, 0}, {4, 5, 0}, {5, 5, 1}, {-1, 5, -1}, {-5, 5, -1}, {-6, 5, -2},
	}
	for _, tt := range tests {
		if got := floorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestPatterns checks the shape of every pattern: the request count the seed
// states, instants sorted and inside the 180 s of model time.
func TestPatterns(t *testing.T) {
	want := map[string]int{pSteady: 3600, pEdge: 2400, pIntermittent: 1800, pSliceEnd: 1800}
	ps := Patterns()
	if len(ps) != len(want) {
		t.Fatalf("%d patterns, want %d", len(ps), len(want))
	}
	for _, p := range ps {
		at := p.At()
		if len(at) != want[p.Name] {
			t.Errorf("%s: %d requests, want %d", p.Name, len(at), want[p.Name])
		}
		if !slices.IsSorted(at) {
			t.Errorf("%s: instants not sorted", p.Name)
		}
		if at[0] < 0 || at[len(at)-1] >= DurationMs {
			t.Errorf("%s: instants span [%d, %d], outside [0, %d)", p.Name, at[0], at[len(at)-1], DurationMs)
		}
	}
}

// TestSeedSlidingEffectiveWindow shows the flaw directly: the seed's window
// forgets a request at 4,999 ms at 60,000 ms, when it is 55,001 ms old.
func TestSeedSlidingEffectiveWindow(t *testing.T) {
	m := SeedSliding(1, WindowMs, SliceMs)
	for _, step := range []struct {
		at   int64
		want bool
	}{{4_999, true}, {59_999, false}, {60_000, true}} {
		if got, _ := m(step.at); got != step.want {
			t.Errorf("request at %d ms: allowed %v, want %v", step.at, got, step.want)
		}
	}
}

// TestLimiterdBoundIsTight builds limiterd's own worst case: a slice whose
// tail holds the full 10 % stops counting one instant before its tail
// leaves the window, so [1 ms, 60,001 ms) holds exactly 1.1x the limit,
// never more.
func TestLimiterdBoundIsTight(t *testing.T) {
	var at []int64
	at = append(at, 0)                                 // opens slice A at 0 ms
	at = append(at, slices.Repeat([]int64{1}, 60)...)  // A's tail: the full 10 %
	at = append(at, slices.Repeat([]int64{2}, 539)...) // slice B: the rest of the limit
	at = append(at, slices.Repeat([]int64{WindowMs}, 100)...)
	m, err := Limiterd(counter.DefaultConfig(), Limit, WindowMs*time.Millisecond, Slices)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := RunModel(m, at)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(acc), 600+61; got != want {
		t.Errorf("accepted %d, want %d (A's 61 leave at 60 s, making room for 61)", got, want)
	}
	if got, want := clustersim.MaxInWindow(acc, WindowMs), Limit*11/10; got != want {
		t.Errorf("max 60 s = %d, want exactly %d", got, want)
	}
}

// TestLimiterdRandomBursts throws seeded random bursts at limiterd and checks
// NFR1 on every run. The bursts are dense enough to push limiterd close to
// its bound (and the seed's window past it), which the test also checks so
// that it cannot pass vacuously.
func TestLimiterdRandomBursts(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 7))
	worst := 0
	for run := range 30 {
		var at []int64
		var t0 int64
		for t0 < 3*DurationMs {
			t0 += rng.Int64N(SliceMs)
			at = append(at, seed.Spread(t0, 1+rng.Int64N(200), 1+rng.IntN(120))...)
		}
		slices.Sort(at)
		m, err := Limiterd(counter.DefaultConfig(), Limit, WindowMs*time.Millisecond, Slices)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := RunModel(m, at)
		if err != nil {
			t.Fatal(err)
		}
		n := clustersim.MaxInWindow(acc, WindowMs)
		if n > Limit*11/10 {
			t.Fatalf("run %d: %d accepted in 60 s, NFR1 allows %d", run, n, Limit*11/10)
		}
		worst = max(worst, n)
	}
	if worst < Limit*105/100 {
		t.Errorf("the worst run reached only %d; the bursts no longer stress the bound", worst)
	}
}
