package limiter

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

func TestOverrideValidation(t *testing.T) {
	l := newLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	tests := []struct {
		name string
		req  Request
		want error
		text string // part of the message
	}{
		{"limit 0", Request{Limit: &LimitSpec{Limit: 0, Window: time.Second}}, ErrInvalidLimit, `field "limit"`},
		{"negative limit", Request{Limit: &LimitSpec{Limit: -3, Window: time.Second}}, ErrInvalidLimit, `field "limit"`},
		{"limit too big", Request{Limit: &LimitSpec{Limit: counter.MaxLimit + 1, Window: time.Second}}, ErrInvalidLimit, `field "limit"`},
		{"no window", Request{Limit: &LimitSpec{Limit: 5}}, ErrInvalidLimit, `field "window"`},
		{"fractional ms", Request{Limit: &LimitSpec{Limit: 5, Window: 1500 * time.Microsecond}}, ErrInvalidLimit, "whole number of milliseconds"},
		{"window too long", Request{Limit: &LimitSpec{Limit: 5, Window: counter.MaxWindow + time.Hour}}, ErrInvalidLimit, "720h"},
		{"negative slices", Request{Limit: &LimitSpec{Limit: 5, Window: time.Second, Slices: -1}}, ErrInvalidLimit, `field "slices"`},
		{"too many slices", Request{Limit: &LimitSpec{Limit: 5, Window: time.Hour, Slices: counter.MaxSlices + 1}}, ErrInvalidLimit, `field "slices"`},
		{"slices under 1ms", Request{Limit: &LimitSpec{Limit: 5, Window: 50 * time.Millisecond, Slices: 51}}, ErrInvalidLimit, "at least 1ms"},
		{"a rule named too", Request{Rule: "default", Limit: &LimitSpec{Limit: 5, Window: time.Second}}, ErrInvalidLimit, "must not name a rule"},
		{"hits over the override", Request{Hits: 6, Limit: &LimitSpec{Limit: 5, Window: time.Second}}, ErrInvalidHits, `"override"`},
		{"peek of hits over it", Request{Hits: 6, Peek: true, Limit: &LimitSpec{Limit: 5, Window: time.Second}}, ErrInvalidHits, `"override"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Key = "k"
			req.Hits = max(req.Hits, 1)
			var d Decision
			err := l.Check(at(0), req, &d)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.want, tt.text)
			}
			if d != (Decision{}) {
				t.Errorf("decision not zeroed: %+v", d)
			}
		})
	}
	if m := l.ov.regs.Load(); m != nil && len(*m) != 0 {
		t.Errorf("invalid overrides registered %d pairs", len(*m))
	}
}

// TestOverrideCounts checks what an override decides and where it counts:
// under ("override", window, slices), shared by overrides of the same
// window and slices whatever their limits, apart from other windows and
// from the rules.
func TestOverrideCounts(t *testing.T) {
	l := newLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	check := func(ms int64, rule string, spec *LimitSpec) Decision {
		t.Helper()
		var d Decision
		if err := l.Check(at(ms), Request{Key: "k", Rule: rule, Hits: 1, Limit: spec}, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	three := &LimitSpec{Limit: 3, Window: time.Second, Policy: "ignored"}
	five := &LimitSpec{Limit: 5, Window: time.Second, Slices: DefaultSlices} // the same pair as three
	other := &LimitSpec{Limit: 3, Window: 2 * time.Second}
	steps := []struct {
		ms        int64
		rule      string
		spec      *LimitSpec
		allowed   bool
		remaining int64
	}{
		{0, "", three, true, 2},
		{1, "", three, true, 1},
		{2, "", three, true, 0},
		{3, "", three, false, 0},
		{4, "", five, true, 1}, // shares the 3 counted
		{5, "", five, true, 0},
		{6, "", three, false, 0},
		{7, "", other, true, 2},         // another window: its own counts
		{8, "default", nil, true, 4},    // the rule counts apart
		{1006, "", three, true, 2},      // the second passed
		{1007, "", other, true, 1},      // 2s window: the one at 7 counts
		{1008, "default", nil, true, 4}, // 1s window: the one at 8 left
	}
	for i, s := range steps {
		d := check(s.ms, s.rule, s.spec)
		if d.Allowed != s.allowed || d.Limits[0].Remaining != s.remaining || d.N != 1 {
			t.Errorf("step %d: %+v; want allowed %v, %d remaining", i, d, s.allowed, s.remaining)
		}
		if s.spec != nil {
			lr := d.Limits[0]
			if d.Rule != OverrideRule || lr.Policy != OverrideRule || lr.Limit != s.spec.Limit || lr.Window != s.spec.Window || d.Decided != DecidedHere {
				t.Errorf("step %d: rule %q, limit %+v; want %q, %d per %v", i, d.Rule, lr, OverrideRule, s.spec.Limit, s.spec.Window)
			}
		}
	}
}

// TestOverridePairsAreBounded fills the registry with MaxOverrideWindows
// pairs and checks that one more is refused, saying why, while every pair
// already registered keeps working.
func TestOverridePairsAreBounded(t *testing.T) {
	l := newLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	var d Decision
	spec := func(i int) *LimitSpec { return &LimitSpec{Limit: 10, Window: time.Duration(i+1) * time.Second} }
	for i := range MaxOverrideWindows {
		if err := l.Check(at(0), Request{Key: "k", Hits: 1, Limit: spec(i)}, &d); err != nil || !d.Allowed {
			t.Fatalf("pair %d: %+v, %v", i, d, err)
		}
	}
	// The same windows with other slice counts are other pairs.
	for _, s := range []*LimitSpec{spec(MaxOverrideWindows), {Limit: 10, Window: time.Second, Slices: 5}} {
		err := l.Check(at(0), Request{Key: "k", Hits: 1, Limit: s}, &d)
		if !errors.Is(err, ErrInvalidLimit) || !strings.Contains(err.Error(), "64 distinct (window, slices) pairs") {
			t.Errorf("pair beyond the bound (%v, %d slices): %v, want ErrInvalidLimit naming the bound", s.Window, s.Slices, err)
		}
	}
	if n := len(*l.ov.regs.Load()); n != MaxOverrideWindows {
		t.Errorf("%d pairs registered, want %d", n, MaxOverrideWindows)
	}
	// Known pairs, with any limit, still decide; peeks too.
	for _, req := range []Request{
		{Key: "k", Hits: 1, Limit: &LimitSpec{Limit: 2, Window: time.Second}},
		{Key: "k", Hits: 1, Limit: &LimitSpec{Limit: 1000, Window: 64 * time.Second, Slices: DefaultSlices}},
		{Key: "k", Hits: 0, Peek: true, Limit: spec(5)},
	} {
		if err := l.Check(at(1), req, &d); err != nil || !d.Allowed {
			t.Errorf("known pair %v: %+v, %v", req.Limit.Window, d, err)
		}
	}
	// SetRules does not reset the bound: counts under a pair outlive rules.
	if err := l.SetRules(mustParse(t, "rules:\n  - name: other\n    limit: 5\n    window: 1s\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(at(2), Request{Key: "k", Hits: 1, Limit: spec(MaxOverrideWindows)}, &d); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("after SetRules: %v, want ErrInvalidLimit", err)
	}
}

// TestOverrideRegistersLargestLimit checks that a pair's registration
// carries the largest limit asked for (the counter bounds the peer slices
// it merges by it), while each check is decided by its own limit.
func TestOverrideRegistersLargestLimit(t *testing.T) {
	l := newLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	k := overrideKey{time.Minute, DefaultSlices}
	for _, s := range []struct{ limit, registered int64 }{{2, 2}, {1000, 1000}, {7, 1000}} {
		var d Decision
		err := l.Check(at(0), Request{Key: "k", Hits: 1, Limit: &LimitSpec{Limit: s.limit, Window: time.Minute}}, &d)
		if err != nil || d.Limits[0].Limit != s.limit {
			t.Fatalf("override %d: %+v, %v", s.limit, d, err)
		}
		if got := (*l.ov.regs.Load())[k].Max(); got != s.registered {
			t.Errorf("after an override of %d the registration holds %d, want %d", s.limit, got, s.registered)
		}
	}
}

// TestOverrideConcurrent registers pairs from many goroutines at once
// (run with -race): every check of a pair within the bound succeeds and the
// bound holds.
func TestOverrideConcurrent(t *testing.T) {
	l := newLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	var wg sync.WaitGroup
	errs := make(chan error, 8*100)
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				var d Decision
				w := time.Duration(1+(i+g)%MaxOverrideWindows) * time.Second
				if err := l.Check(at(int64(i)), Request{Key: "k", Hits: 1, Limit: &LimitSpec{Limit: int64(1 + i), Window: w}}, &d); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(*l.ov.regs.Load()); n != MaxOverrideWindows {
		t.Errorf("%d pairs registered, want %d", n, MaxOverrideWindows)
	}
}

// TestOverrideInCoordinatedCluster checks that an override at the margin
// is decided here with the budget, never left to the coordinator.
func TestOverrideInCoordinatedCluster(t *testing.T) {
	_, l := coordinatedNode(t, "a")
	var d Decision
	if err := l.Check(at(0), Request{Key: "x", Hits: 1}, &d); err != nil || !d.Coordinate {
		t.Fatalf("rule check = %+v, %v; want Coordinate", d, err)
	}
	req := Request{Key: "x", Hits: 1, Limit: &LimitSpec{Limit: 10, Window: time.Second}}
	if err := l.Check(at(0), req, &d); err != nil || d.Coordinate || !d.Allowed || d.Decided != DecidedInFallback || d.Rule != OverrideRule {
		t.Fatalf("override = %+v, %v; want allowed by the budget", d, err)
	}
}

func TestOverrideNameIsReserved(t *testing.T) {
	_, err := Parse("r.yaml", []byte("rules:\n  - name: override\n    limit: 5\n    window: 1s\n"))
	if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), `r.yaml:2: rules[0]: field "name": "override" is reserved`) {
		t.Errorf("Parse: %v", err)
	}
	rs := &RuleSet{Source: "code", Rules: []Rule{{Name: OverrideRule, Limits: []LimitSpec{{Policy: OverrideRule, Limit: 5, Window: time.Second, Slices: 12}}}}}
	if err := rs.Validate(); !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), "reserved for limit overrides") {
		t.Errorf("Validate: %v", err)
	}
}
