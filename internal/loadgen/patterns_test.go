package loadgen

import (
	"github.com/limiterd/limiterd/internal/seed"

	"math"
	"slices"
	"testing"
	"time"
)

func TestSteadyFactors(t *testing.T) {
	tests := []struct {
		limit  int
		window time.Duration
		factor float64
		d      time.Duration
		n      int
		step   time.Duration
	}{
		{600, time.Minute, 1, time.Minute, 600, 100 * time.Millisecond},                 // the seed's 10/s for one window
		{600, time.Minute, 9, time.Minute, 5400, time.Second / 90},                      // the seed's 90/s
		{600, 10 * time.Second, 0.9, 20 * time.Second, 1080, time.Second / 54},          // e2e's 0.9x
		{60, 10 * time.Second, 9, 20 * time.Second, 1080, time.Second / 54},             // e2e's 9x of 60
		{600, 10 * time.Second, 2, 30 * time.Second, 3600, 10 * time.Second / 1200},     // steady 2x, 10 s window
		{7, time.Second, 3, 1500 * time.Millisecond, 32, time.Second / 21},              // not a whole number of requests
		{1, time.Hour, 1, 30 * time.Minute, 1, time.Hour},                               // one request
		{100, time.Second, 1000, 10 * time.Millisecond, 1000, time.Second / 100 / 1000}, // 100,000/s
	}
	for _, tt := range tests {
		at := seed.Steady(tt.limit, tt.window, tt.factor, tt.d)
		if len(at) != tt.n {
			t.Errorf("%+v: %d requests, want %d", tt, len(at), tt.n)
			continue
		}
		if at[0] != 0 || at[len(at)-1] >= tt.d {
			t.Errorf("%+v: from %v to %v, want [0, %v)", tt, at[0], at[len(at)-1], tt.d)
		}
		if len(at) > 1 {
			if d := at[1] - at[0]; d < tt.step-1 || d > tt.step+1 {
				t.Errorf("%+v: step %v, want %v", tt, d, tt.step)
			}
		}
	}
}

func TestCapTimes(t *testing.T) {
	at := seed.Intermittent(600, 10*time.Second)
	if got := capTimes(at, 10*time.Second); len(got) != 600 {
		t.Errorf("one window of intermittent: %d requests, want 600", len(got))
	}
	if got := capTimes(at, time.Hour); len(got) != 1800 {
		t.Errorf("uncapped: %d, want 1800", len(got))
	}
	if got := capTimes(at, 0); len(got) != 0 {
		t.Errorf("capped at 0: %d, want 0", len(got))
	}
}

func drain(s schedule) []arrival {
	var out []arrival
	for {
		a, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, a)
	}
}

func TestPoisson(t *testing.T) {
	tests := []struct {
		rate float64
		d    time.Duration
		keys int
		s    float64
	}{
		{1000, 10 * time.Second, 0, 0},
		{40000, time.Second, 200_000, 1.1},
		{5000, 2 * time.Second, 10, 0},
	}
	for _, tt := range tests {
		var kp *keyPicker
		if tt.keys > 0 {
			kp = newKeyPicker(7, tt.keys, tt.s)
		}
		got := drain(newPoisson(7, tt.rate, tt.d, kp))
		want := tt.rate * tt.d.Seconds()
		// A Poisson count has standard deviation sqrt(want); 5 of them is
		// a bound a correct generator with this fixed seed stays inside.
		if n := float64(len(got)); n < want-5*math.Sqrt(want) || n > want+5*math.Sqrt(want) {
			t.Errorf("%+v: %d arrivals, want about %.0f", tt, len(got), want)
		}
		for i, a := range got {
			if a.at < 0 || a.at >= tt.d || (i > 0 && a.at < got[i-1].at) {
				t.Fatalf("%+v: arrival %d at %v out of order or range", tt, i, a.at)
			}
			if a.key < 0 || (tt.keys == 0 && a.key != 0) || (tt.keys > 0 && int(a.key) >= tt.keys) {
				t.Fatalf("%+v: arrival %d on key %d", tt, i, a.key)
			}
		}
		// Same seed, same schedule.
		if again := drain(newPoisson(7, tt.rate, tt.d, func() *keyPicker {
			if tt.keys > 0 {
				return newKeyPicker(7, tt.keys, tt.s)
			}
			return nil
		}())); !slices.Equal(again, got) {
			t.Errorf("%+v: the schedule is not reproducible", tt)
		}
	}
}

// TestZipfSkew checks the skew the keys pattern documents: with s = 1.1
// over 200,000 keys the hottest key takes about an eighth of the traffic,
// and uniform picking spreads evenly.
func TestZipfSkew(t *testing.T) {
	const draws = 200_000
	count := func(k *keyPicker) map[int32]int {
		m := map[int32]int{}
		for range draws {
			m[k.pick()]++
		}
		return m
	}
	z := count(newKeyPicker(1, 200_000, 1.1))
	if share := float64(z[0]) / draws; share < 0.10 || share > 0.16 {
		t.Errorf("Zipf 1.1: hottest key has %.3f of the draws, want about 0.13", share)
	}
	if z[0] <= z[1] || z[1] <= z[9] {
		t.Errorf("Zipf 1.1: key 0 %d, key 1 %d, key 9 %d draws: not decreasing", z[0], z[1], z[9])
	}
	u := count(newKeyPicker(1, 10, 0))
	for k := range int32(10) {
		if share := float64(u[k]) / draws; share < 0.09 || share > 0.11 {
			t.Errorf("uniform: key %d has %.3f of the draws, want 0.1", k, share)
		}
	}
}

// TestLCGPicker pins --spread lcg to the seed's node choices (computed
// independently: s = (s*1103515245 + 12345) % 2**32, node = s*8 // 2**32).
func TestLCGPicker(t *testing.T) {
	p := newTargetPicker(SpreadLCG, seedLCGSeed, 8, 1)
	for i, want := range []int{1, 5, 6, 5, 0, 3, 4, 7, 4, 4, 6, 6} {
		if got := p.pick(0, nil); got != want {
			t.Fatalf("draw %d: node %d, want %d", i, got, want)
		}
	}
}

func TestTargetPickers(t *testing.T) {
	for _, spread := range []string{SpreadRandom, SpreadRoundRobin, SpreadKeyRoundRobin, SpreadLCG} {
		p := newTargetPicker(spread, 3, 5, 3)
		seen := make([]int, 5)
		for j := range 5000 {
			i := p.pick(int32(j%3), nil)
			if i < 0 || i >= 5 {
				t.Fatalf("%s: target %d of 5", spread, i)
			}
			seen[i]++
		}
		for i, n := range seen {
			if n < 800 || n > 1200 {
				t.Errorf("%s: target %d got %d of 5000", spread, i, n)
			}
		}
	}
	rr := newTargetPicker(SpreadRoundRobin, 0, 3, 1)
	for i := range 7 {
		if got := rr.pick(0, nil); got != i%3 {
			t.Errorf("round-robin pick %d = %d", i, got)
		}
	}
	// Each key through the targets in turn, from its own: keys 0 and 4
	// of 3 targets, asked in turn.
	krr := newTargetPicker(SpreadKeyRoundRobin, 0, 3, 5)
	var got []int
	for range 4 {
		got = append(got, krr.pick(0, nil), krr.pick(4, nil))
	}
	if !slices.Equal(got, []int{0, 1, 1, 2, 2, 0, 0, 1}) {
		t.Errorf("key-round-robin picks %v", got)
	}
	// With target 1 down, key 0 passes it over for 2 and goes on from
	// there; the other spreads take the next target up.
	down1 := func(t int) bool { return t != 1 }
	got = nil
	for range 4 {
		got = append(got, krr.pick(0, down1))
	}
	if !slices.Equal(got, []int{2, 0, 2, 0}) {
		t.Errorf("key-round-robin picks with target 1 down %v", got)
	}
	rr = newTargetPicker(SpreadRoundRobin, 0, 3, 1)
	got = nil
	for range 3 {
		got = append(got, rr.pick(0, down1))
	}
	if !slices.Equal(got, []int{0, 2, 2}) {
		t.Errorf("round-robin picks with target 1 down %v", got)
	}
}
