package clustersim

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// smallSim is a cheap cluster for property tests: 20 per second in 4
// slices, 4 nodes syncing every 50 ms.
func smallSim() Config {
	return Config{Nodes: 4, Limit: 20, Window: time.Second, Slices: 4, Sync: 50 * time.Millisecond, Floor: 1, Grace: 0.25}
}

// compliantTrace draws bursty arrivals and keeps those that fit an exact
// sliding log of limit per window: a client that never exceeds its limit,
// often sitting right at it.
func compliantTrace(rng *rand.Rand, limit int, windowMs, durationMs int64) []int64 {
	var at []int64
	lo := 0
	for t := int64(0); t < durationMs; t += rng.Int64N(windowMs / 4) {
		for range rng.IntN(limit) {
			c := t + rng.Int64N(windowMs/10)
			if len(at) > 0 && c < at[len(at)-1] {
				c = at[len(at)-1]
			}
			for lo < len(at) && at[lo] <= c-windowMs {
				lo++
			}
			if len(at)-lo < limit {
				at = append(at, c)
			}
		}
	}
	return at
}

// TestNoBudgetNeverRejectsACompliantClient is NFR2 on the cluster: with the
// budget off and one clock, the nodes' counts are never above the truth,
// whatever the latency, tick phases, duplicated and reordered delivery, or
// the nodes the requests reach.
func TestNoBudgetNeverRejectsACompliantClient(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 5))
	variants := []struct {
		name             string
		latency, stagger time.Duration
		dup              bool
		loss             float64
		reorder          time.Duration
	}{
		{"base", 0, 0, false, 0, 0},
		{"duplicated and late", 0, 0, true, 0, 0},
		{"latency 7ms", 7 * time.Millisecond, 0, true, 0, 0},
		{"staggered ticks", 3 * time.Millisecond, 50 * time.Millisecond, true, 0, 0},
		{"lossy and reordered", time.Millisecond, 0, false, 0.3, 40 * time.Millisecond},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			sc := smallSim()
			sc.Latency, sc.Stagger, sc.Dup, sc.Loss, sc.Reorder, sc.NetSeed = v.latency, v.stagger, v.dup, v.loss, v.reorder, 7
			for run := range 6 {
				at := compliantTrace(rng, int(sc.Limit), 1000, 8000)
				nodes := LCGNodes(uint32(run), sc.Nodes)
				if run%2 == 1 {
					nodes = RoundRobin(sc.Nodes)
				}
				r, err := RunClient(sc, at, nodes)
				if err != nil {
					t.Fatal(err)
				}
				if r.Rejected != 0 || r.Accepted != len(at) {
					t.Fatalf("run %d: %d of %d compliant requests rejected", run, r.Rejected, len(at))
				}
				if r.MaxInWindow != int(sc.Limit) {
					t.Fatalf("run %d: the trace peaks at %d in a window; it should sit at the limit", run, r.MaxInWindow)
				}
			}
		})
	}
}

// TestBudgetFloorAdmitsTheLimitRate: a client at its limit rate sends at
// most the floor (BudgetFloor 1) in any sync interval, so the budget never
// rejects it, even when every request reaches the same node.
func TestBudgetFloorAdmitsTheLimitRate(t *testing.T) {
	for _, nodes := range []func(int) int{func(int) int { return 0 }, RoundRobin(4), LCGNodes(7, 4)} {
		for _, stagger := range []time.Duration{0, 50 * time.Millisecond} {
			sc := smallSim()
			sc.Budget, sc.Stagger, sc.Latency = true, stagger, time.Millisecond
			r, err := RunClient(sc, SteadyAt(20, 10_000), nodes)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rejected != 0 {
				t.Errorf("stagger %v: %d of %d rejected at the limit rate", stagger, r.Rejected, r.Requests)
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"no nodes", func(sc *Config) { sc.Nodes = 0 }},
		{"too many nodes", func(sc *Config) { sc.Nodes = MaxNodes + 1 }},
		{"zero sync", func(sc *Config) { sc.Sync = 0 }},
		{"fractional sync", func(sc *Config) { sc.Sync = 1500 * time.Microsecond }},
		{"negative latency", func(sc *Config) { sc.Latency = -time.Millisecond }},
		{"negative see-after", func(sc *Config) { sc.SeeAfter = -time.Millisecond }},
		{"fractional see-after", func(sc *Config) { sc.SeeAfter = 1500 * time.Microsecond }},
		{"stagger above sync", func(sc *Config) { sc.Stagger = 201 * time.Millisecond }},
		{"huge skew", func(sc *Config) { sc.Skew = 2 * time.Hour }},
		{"certain loss", func(sc *Config) { sc.Loss = 1 }},
		{"negative workers", func(sc *Config) { sc.Workers = -1 }},
		{"negative tolerance", func(sc *Config) { sc.Tolerance = -0.1 }},
		{"tolerance past the limit", func(sc *Config) { sc.Tolerance = 1.5 }},
	}
	for _, tt := range tests {
		sc := DefaultConfig()
		tt.edit(&sc)
		if _, err := New(sc); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tt.name, err)
		}
	}
	sc := DefaultConfig()
	sc.Floor = -1 // the counter's own validation
	if _, err := New(sc); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative floor: %v", err)
	}
	// Every problem is reported, not the first alone.
	sc = DefaultConfig()
	sc.Nodes, sc.Latency = 0, -time.Millisecond
	if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "nodes must be") || !strings.Contains(err.Error(), "latency must be") {
		t.Errorf("two problems: %v", err)
	}
}

func TestSkewAndStaggerLayout(t *testing.T) {
	tests := []struct {
		name       string
		stagger    time.Duration
		clockTicks bool
		wantPhases []int64
	}{
		{"staggered", 200 * time.Millisecond, false, []int64{0, 25, 50, 75, 100, 125, 150, 175}},
		// A node 50 ms ahead reads a multiple of 200 ms 50 ms early: phase 150.
		{"ticks on each clock", 0, true, []int64{50, 35, 21, 7, 193, 179, 165, 150}},
		{"both", 200 * time.Millisecond, true, []int64{50, 60, 71, 82, 93, 104, 115, 125}},
	}
	for _, tt := range tests {
		sc := DefaultConfig()
		sc.Skew, sc.Stagger, sc.ClockTicks = 50*time.Millisecond, tt.stagger, tt.clockTicks
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		var offsets, phases []int64
		for _, n := range s.nodes {
			offsets, phases = append(offsets, n.offset), append(phases, n.phase)
		}
		if want := []int64{-50, -35, -21, -7, 7, 21, 35, 50}; !slices.Equal(offsets, want) {
			t.Errorf("%s: offsets %v, want %v", tt.name, offsets, want)
		}
		if !slices.Equal(phases, tt.wantPhases) {
			t.Errorf("%s: phases %v, want %v", tt.name, phases, tt.wantPhases)
		}
	}
}

// TestSkewIsObserved: the offset each Engine estimates from its peers'
// messages is the clock difference plus the latency.
func TestSkewIsObserved(t *testing.T) {
	sc := smallSim()
	sc.Skew, sc.Latency = 30*time.Millisecond, 2*time.Millisecond
	r, err := RunClient(sc, SteadyAt(40, 3000), RoundRobin(sc.Nodes))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2*30 + 2); r.MaxOffsetMs != want {
		t.Errorf("largest observed offset %d ms, want %d", r.MaxOffsetMs, want)
	}
}

// TestAskRepeatedAfterLoss: on a lossy network a check whose ask or
// answer was lost is asked again at half the deadline, as a node does
// (cluster.Node.Coordinate), and the repeat is answered, the first answer
// again when the coordinator gave one: fewer checks fall back than asks
// went unanswered the first time, and the coordinator never decides one
// ask twice.
func TestAskRepeatedAfterLoss(t *testing.T) {
	sc := smallSim()
	sc.Budget, sc.Latency, sc.Loss, sc.NetSeed = true, time.Millisecond, 0.3, 11
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	var d limiter.Decision
	for at := int64(0); at < 5000; at += 5 { // 200 a second of a limit of 20: always at the margin
		if err := s.Check(at, "hot", int(at/5)%sc.Nodes, 1, &d); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var retried, repeated, answered uint64
	for i := range s.Len() {
		es := &s.Node(i).Engine().Stats
		retried += es.AsksRetried.Load()
		repeated += es.AnswersRepeated.Load()
		answered += es.AsksAnswered.Load()
	}
	t.Logf("%d checks, %d asks, %d asked again, %d answered again, %d decided by coordinators, %d fell back", st.Requests, st.Asks, retried, repeated, answered, st.Fallback)
	if retried == 0 || repeated == 0 || uint64(st.Fallback) >= retried {
		t.Fatalf("%d asked again, %d answered again, %d fell back: want repeats that are answered", retried, repeated, st.Fallback)
	}
	if int64(answered)+int64(repeated) > int64(st.Asks) {
		t.Fatalf("%d decisions and %d repeated answers for %d asks sent", answered, repeated, st.Asks)
	}
}
