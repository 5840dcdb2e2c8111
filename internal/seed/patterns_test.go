package seed

import (
	"slices"
	"testing"
	"time"
)

// seedSpreadMs is the study's layout of a burst (hiz/pencere.mjs), in its
// own integer arithmetic: request i of n at start + floor(i*5000/n) ms.
func seedSpreadMs(start int64, n int) []int64 {
	at := make([]int64, n)
	for i := range at {
		at[i] = start + int64(i)*5000/int64(n)
	}
	return at
}

func millis(at []time.Duration) []int64 {
	out := make([]int64, len(at))
	for i, t := range at {
		out[i] = t.Milliseconds()
	}
	return out
}

// TestSeedPatternsExact pins the three window patterns at the study's own
// scale (600 per 60 s, 180 s) to its request counts and instants.
func TestSeedPatternsExact(t *testing.T) {
	var steady, edge, inter []int64
	for i := range int64(3600) {
		steady = append(steady, i*50)
	}
	for _, e := range []int64{60_000, 120_000} {
		edge = append(edge, seedSpreadMs(e-5000, 600)...)
		edge = append(edge, seedSpreadMs(e, 600)...)
	}
	for k := range int64(3) {
		inter = append(inter, seedSpreadMs(k*60_000, 600)...)
	}
	tests := []struct {
		name string
		got  []time.Duration
		want []int64
	}{
		{"steady 2x", Steady(600, time.Minute, 2, 3*time.Minute), steady},
		{"edge-burst", EdgeBurst(600, time.Minute), edge},
		{"intermittent", Intermittent(600, time.Minute), inter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.got) != len(tt.want) {
				t.Fatalf("%d requests, want %d", len(tt.got), len(tt.want))
			}
			if got := millis(tt.got); !slices.Equal(got, tt.want) {
				for i := range got {
					if got[i] != tt.want[i] {
						t.Fatalf("request %d at %d ms, want %d ms", i, got[i], tt.want[i])
					}
				}
			}
			if !slices.IsSorted(tt.got) {
				t.Error("instants not in order")
			}
		})
	}
}

// TestSeedPatternsScaled checks that a shorter window scales every instant
// of the seed by window/60 s (to the nanosecond the integer layout loses)
// and keeps the request counts.
func TestSeedPatternsScaled(t *testing.T) {
	for _, w := range []time.Duration{10 * time.Second, 6 * time.Second, 1500 * time.Millisecond} {
		scale := float64(w) / float64(time.Minute)
		for _, tt := range []struct {
			name       string
			seed, got  []time.Duration
			wantCount  int
			wantLastLT time.Duration
		}{
			{"steady 2x", Steady(600, time.Minute, 2, 3*time.Minute), Steady(600, w, 2, 3*w), 3600, 3 * w},
			{"edge-burst", EdgeBurst(600, time.Minute), EdgeBurst(600, w), 2400, 2*w + w/12},
			{"intermittent", Intermittent(600, time.Minute), Intermittent(600, w), 1800, 2*w + w/12},
		} {
			if len(tt.got) != tt.wantCount || len(tt.seed) != tt.wantCount {
				t.Fatalf("%v %s: %d requests (seed scale %d), want %d", w, tt.name, len(tt.got), len(tt.seed), tt.wantCount)
			}
			for i := range tt.got {
				want := float64(tt.seed[i]) * scale
				if d := float64(tt.got[i]) - want; d < -2 || d > 2 {
					t.Fatalf("%v %s: request %d at %v, want %v scaled from %v", w, tt.name, i, tt.got[i], time.Duration(want), tt.seed[i])
				}
			}
			if last := tt.got[len(tt.got)-1]; last >= tt.wantLastLT {
				t.Errorf("%v %s: last request at %v, want before %v", w, tt.name, last, tt.wantLastLT)
			}
		}
	}
}

// TestMillisecondsAndDurations: the patterns in milliseconds are the
// patterns in durations, as limitsim (ms) and limitload (durations) use
// them.
func TestMillisecondsAndDurations(t *testing.T) {
	for _, tc := range []struct {
		ms  []int64
		dur []time.Duration
	}{
		{Steady[int64](600, 60_000, 2, 180_000), Steady(600, time.Minute, 2, 3*time.Minute)},
		{EdgeBurst[int64](600, 60_000), EdgeBurst(600, time.Minute)},
		{Intermittent[int64](600, 60_000), Intermittent(600, time.Minute)},
	} {
		if !slices.Equal(tc.ms, millis(tc.dur)) {
			t.Fatalf("%d instants in ms differ from %d in durations", len(tc.ms), len(tc.dur))
		}
	}
}
