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

// TestOverrideRegistrationIsTheFamilys checks that a pair's registration
// is one of the counter's family OverrideRule, whose max where no call is
// at hand is counter.MaxLimit: a node that only ever saw small overrides
// of a pair still merges every slice a peer counted under a large one
// (with the pair's registration at the largest override seen here, 2, it
// would refuse a peer's slices past 4 x 2 + 13 of them), while each check
// is decided by its own limit.
func TestOverrideRegistrationIsTheFamilys(t *testing.T) {
	c := newCounter(t)
	if err := c.SetCluster(counter.DefaultClusterConfig("a")); err != nil {
		t.Fatal(err)
	}
	l, err := New(c, mustParse(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := overrideKey{time.Minute, DefaultSlices}
	for _, limit := range []int64{2, 1000, 7} {
		var d Decision
		err := l.Check(at(0), Request{Key: "k", Hits: 1, Limit: &LimitSpec{Limit: limit, Window: time.Minute}}, &d)
		if err != nil || d.Limits[0].Limit != limit {
			t.Fatalf("override %d: %+v, %v", limit, d, err)
		}
		if !(*l.ov.regs.Load())[k].Family() {
			t.Fatalf("after an override of %d the registration is not the family's", limit)
		}
	}
	// 500 slices of peer b, one a millisecond, all merged.
	id := counter.LimitID(OverrideRule, time.Minute, DefaultSlices)
	var es []counter.Entry
	for i := range int64(500) {
		es = append(es, counter.Entry{Limit: id, Key: "peer-key", Origin: "b", Start: at(0).UnixMilli() + i, Count: 1})
	}
	if ms := c.Merge(at(500), es); ms.Merged != 500 || ms.Refused != 0 {
		t.Fatalf("Merge: %+v, want all 500 merged", ms)
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
// is left to the key's coordinator, as a rule's check is: the ask states
// the override's limit (counter.Ask.Max), a coordinator that never saw the
// override's pair decides it with that limit, and Complete counts the
// grant, remembers the denial, or, without an answer, decides with the
// budget.
func TestOverrideInCoordinatedCluster(t *testing.T) {
	_, l := coordinatedNode(t, "a")
	ck, _ := coordinatedNode(t, "k")
	var d Decision
	if err := l.Check(at(0), Request{Key: "x", Hits: 1}, &d); err != nil || !d.Coordinate {
		t.Fatalf("rule check = %+v, %v; want Coordinate", d, err)
	}
	slices := defaultSlices(time.Second)
	// ask checks req on a, which must leave it to the coordinator, and
	// returns k's answer to it, as the coordinator sees a's ask.
	ask := func(req Request, id uint64) Answer {
		t.Helper()
		if err := l.Check(at(0), req, &d); err != nil || !d.Coordinate || d.Allowed || d.Rule != OverrideRule {
			t.Fatalf("override %+v = %+v, %v; want Coordinate", *req.Limit, d, err)
		}
		var ask counter.Ask
		if err := l.PrepareAsk(at(0), req, &ask); err != nil {
			t.Fatal(err)
		}
		if want := counter.LimitID(OverrideRule, time.Second, slices); len(ask.Limits) != 1 || ask.Limits[0] != want || len(ask.Max) != 1 || ask.Max[0] != req.Limit.Limit {
			t.Fatalf("ask %+v, want the limit %s stated at %d", ask, want, req.Limit.Limit)
		}
		res := make([]counter.Result, 1)
		kd, err := ck.Coordinate(at(0), "a", id, &ask, res)
		if err != nil {
			t.Fatal(err)
		}
		return Answer{Answered: true, Allowed: kd.Allowed, Results: res}
	}
	req := Request{Key: "x", Hits: 1, Limit: &LimitSpec{Limit: 2, Window: time.Second}}
	if err := l.Complete(at(0), req, ask(req, 1), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Decided != DecidedByCoordinator || d.Limits[0].Limit != 2 || d.Limits[0].Remaining != 1 {
		t.Fatalf("grant: %+v", d)
	}
	// k's own check of the key: the coordinator counts 2 then (a knows
	// of 1), and denies a's next.
	kl, err := ck.Limit(OverrideRule, 2, time.Second, slices)
	if err != nil || !kl.Family() {
		t.Fatalf("k's registration: %+v %v", kl, err)
	}
	var kask counter.Ask
	ck.PrepareAsk(at(0), "x", 1, []counter.Limit{kl}, &kask)
	if kd, err := ck.Coordinate(at(0), "k", 0, &kask, make([]counter.Result, 1)); err != nil || !kd.Allowed {
		t.Fatalf("k's own check: %+v %v", kd, err)
	}
	if err := l.Complete(at(0), req, ask(req, 2), &d); err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Decided != DecidedByCoordinator || d.Limits[0].Remaining != 0 || d.RetryAfter <= 0 {
		t.Fatalf("denial: %+v", d)
	}
	// The denial is remembered for a limit of at most 2: the same again
	// is denied here; a larger stated limit on the same pair goes to the
	// coordinator again.
	if err := l.Check(at(1), req, &d); err != nil || d.Coordinate || d.Allowed {
		t.Fatalf("the denied limit again: %+v, %v; want denied here (remembered)", d, err)
	}
	big := Request{Key: "x", Hits: 1, Limit: &LimitSpec{Limit: 10, Window: time.Second}}
	if a := ask(big, 3); !a.Allowed || a.Results[0].Limit != 10 {
		t.Fatalf("a larger limit after the denial: %+v, want granted with 10", a)
	}
	// No answer in time: the budget decides.
	other := Request{Key: "y", Hits: 1, Limit: &LimitSpec{Limit: 2, Window: time.Second}}
	if err := l.Check(at(0), other, &d); err != nil || !d.Coordinate {
		t.Fatalf("Check of y: %+v %v", d, err)
	}
	if err := l.Complete(at(0), other, Answer{}, &d); err != nil || !d.Allowed || d.Decided != DecidedInFallback || d.Rule != OverrideRule {
		t.Fatalf("no answer: %+v %v; want allowed by the budget", d, err)
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
