package limiter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

const peekRules = `rules:
  - name: api
    match: "api:*"
    limits:
      - {limit: 3, window: 1s, slices: 4}
      - {limit: 5, window: 10s}
  - name: trial
    match: "trial:*"
    limit: 2
    window: 1s
    shadow: true
  - name: default
    limit: 4
    window: 2s
`

// TestCheckPeek steps keys through peeks and checks, each peek asserting
// what it reports and that it counted nothing: the check after it decides
// as if the peek had not been made.
func TestCheckPeek(t *testing.T) {
	l := newLimiter(t, peekRules)
	type step struct {
		ms        int64
		key       string
		hits      int64
		peek      bool
		allowed   bool
		would     bool
		remaining []int64
		retry     time.Duration
	}
	steps := []step{
		{ms: 0, key: "api:a", hits: 1, peek: true, allowed: true, would: true, remaining: []int64{3, 5}},
		{ms: 0, key: "api:a", hits: 0, peek: true, allowed: true, would: true, remaining: []int64{3, 5}},
		{ms: 0, key: "api:a", hits: 3, peek: true, allowed: true, would: true, remaining: []int64{3, 5}},
		{ms: 0, key: "api:a", hits: 2, allowed: true, would: true, remaining: []int64{1, 3}},
		// 2 counted: 1 more fits the 1s limit, 2 do not.
		{ms: 100, key: "api:a", hits: 1, peek: true, allowed: true, would: true, remaining: []int64{1, 3}},
		{ms: 100, key: "api:a", hits: 2, peek: true, remaining: []int64{1, 3}, retry: 900 * time.Millisecond},
		{ms: 100, key: "api:a", hits: 1, allowed: true, would: true, remaining: []int64{0, 2}},
		{ms: 200, key: "api:a", hits: 1, peek: true, remaining: []int64{0, 2}, retry: 800 * time.Millisecond},
		// 0 hits: at the limit is not over it.
		{ms: 200, key: "api:a", hits: 0, peek: true, allowed: true, would: true, remaining: []int64{0, 2}},
		{ms: 200, key: "api:a", hits: 1, remaining: []int64{0, 2}, retry: 800 * time.Millisecond},
		{ms: 1000, key: "api:a", hits: 1, peek: true, allowed: true, would: true, remaining: []int64{2, 2}}, // the slice at 0 left
		// A shadow rule allows, and WouldAllow tells.
		{ms: 0, key: "trial:x", hits: 2, allowed: true, would: true, remaining: []int64{0}},
		{ms: 10, key: "trial:x", hits: 1, peek: true, allowed: true, remaining: []int64{0}, retry: 990 * time.Millisecond},
		{ms: 10, key: "trial:x", hits: 0, peek: true, allowed: true, would: true, remaining: []int64{0}},
		// An untracked key: nothing counted, everything remaining.
		{ms: 0, key: "nobody", hits: 4, peek: true, allowed: true, would: true, remaining: []int64{4}},
		{ms: 0, key: "nobody", hits: 4, allowed: true, would: true, remaining: []int64{0}},
	}
	for i, s := range steps {
		var d Decision
		if err := l.Check(at(s.ms), Request{Key: s.key, Hits: s.hits, Peek: s.peek}, &d); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d.Allowed != s.allowed || d.WouldAllow != s.would || d.RetryAfter != s.retry || d.Coordinate || d.N != len(s.remaining) {
			t.Errorf("step %d (%dms %q x%d peek=%v): %+v; want allowed %v would %v retry %v", i, s.ms, s.key, s.hits, s.peek, d, s.allowed, s.would, s.retry)
			continue
		}
		for j, rem := range s.remaining {
			if d.Limits[j].Remaining != rem {
				t.Errorf("step %d limit %s: remaining %d, want %d", i, d.Limits[j].Policy, d.Limits[j].Remaining, rem)
			}
		}
	}
}

func TestCheckPeekErrors(t *testing.T) {
	l := newLimiter(t, peekRules)
	tests := []struct {
		name string
		req  Request
		want error
	}{
		{"negative hits", Request{Key: "api:a", Hits: -1, Peek: true}, ErrInvalidHits},
		{"hits over the smallest limit", Request{Key: "api:a", Hits: 4, Peek: true}, ErrInvalidHits},
		{"0 hits without peek", Request{Key: "api:a", Hits: 0}, ErrInvalidHits},
		{"empty key", Request{Hits: 0, Peek: true}, ErrInvalidKey},
		{"unknown rule", Request{Key: "k", Rule: "nope", Peek: true}, ErrUnknownRule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decision
			if err := l.Check(at(0), tt.req, &d); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if d != (Decision{}) {
				t.Errorf("decision not zeroed: %+v", d)
			}
		})
	}
	for _, hits := range []int64{0, 3} {
		var d Decision
		if err := l.Check(at(0), Request{Key: "api:a", Hits: hits, Peek: true}, &d); err != nil {
			t.Errorf("peek of %d hits: %v", hits, err)
		}
	}
}

// TestCheckPeekAgreesWithCheck runs random histories on two limiters with
// the same rules, peeking on one before each check: the peek's WouldAllow
// is the check's on the twin, and the checks of both decide the same, so
// the peeks (and those at other keys in between) counted nothing.
func TestCheckPeekAgreesWithCheck(t *testing.T) {
	keys := []string{"api:a", "api:b", "trial:x", "other", "another"}
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			a, b := newLimiter(t, peekRules), newLimiter(t, peekRules)
			rng := rand.New(rand.NewPCG(seed, 99))
			var denied int
			ms := int64(0)
			for step := range 2000 {
				ms += rng.Int64N(120)
				req := Request{Key: keys[rng.IntN(len(keys))], Hits: 1 + rng.Int64N(2)}
				peek := req
				peek.Peek = true
				var pd, ad, bd Decision
				if err := a.Check(at(ms), peek, &pd); err != nil {
					t.Fatal(err)
				}
				other := Request{Key: keys[rng.IntN(len(keys))], Hits: rng.Int64N(3), Peek: true}
				if err := a.Check(at(ms+rng.Int64N(2000)), other, &ad); err != nil {
					t.Fatal(err)
				}
				if err := b.Check(at(ms), req, &bd); err != nil {
					t.Fatal(err)
				}
				if err := a.Check(at(ms), req, &ad); err != nil {
					t.Fatal(err)
				}
				if ad != bd {
					t.Fatalf("step %d: after peeks %+v, without %+v", step, ad, bd)
				}
				if pd.WouldAllow != bd.WouldAllow || pd.Allowed != bd.Allowed || pd.Rule != bd.Rule || pd.Shadow != bd.Shadow {
					t.Fatalf("step %d %+v: peek %+v, check %+v", step, req, pd, bd)
				}
				if !bd.WouldAllow {
					denied++
					if pd.RetryAfter != bd.RetryAfter {
						t.Fatalf("step %d: peek RetryAfter %v, check %v", step, pd.RetryAfter, bd.RetryAfter)
					}
				}
			}
			if denied == 0 {
				t.Error("no check was denied: the comparison proved little")
			}
		})
	}
}

// TestPeekIsNeverCoordinated checks, in a coordinated cluster where every
// check at the margin asks the coordinator, that a peek decides here, and
// that PrepareAsk and Complete refuse peeks (with or without a limit
// override: overrides themselves are coordinated, TestOverrideInCoordinatedCluster).
func TestPeekIsNeverCoordinated(t *testing.T) {
	_, l := coordinatedNode(t, "a")
	var d Decision
	if err := l.Check(at(0), Request{Key: "x", Hits: 1}, &d); err != nil || !d.Coordinate {
		t.Fatalf("Check = %+v, %v; want Coordinate (10/s on 2 nodes has no blind share)", d, err)
	}
	for _, hits := range []int64{0, 1, 10} {
		if err := l.Check(at(0), Request{Key: "x", Hits: hits, Peek: true}, &d); err != nil || d.Coordinate || !d.Allowed || d.Decided != DecidedHere || d.Limits[0].Remaining != 10 {
			t.Errorf("peek of %d: %+v, %v; want allowed here, 10 remaining", hits, d, err)
		}
	}
	spec := &LimitSpec{Limit: 5, Window: time.Second}
	for _, req := range []Request{{Key: "x", Hits: 1, Peek: true}, {Key: "x", Hits: 1, Peek: true, Limit: spec}} {
		var ask counter.Ask
		if err := l.PrepareAsk(at(0), req, &ask); err == nil {
			t.Errorf("PrepareAsk(%+v) = nil error, want a refusal", req)
		}
		if err := l.Complete(at(0), req, Answer{Answered: true, Allowed: true, Results: make([]counter.Result, 1)}, &d); err == nil || d != (Decision{}) {
			t.Errorf("Complete(%+v) = %+v, %v; want a refusal", req, d, err)
		}
	}
	// Nothing was counted by any of it.
	if err := l.Check(at(0), Request{Key: "x", Hits: 0, Peek: true}, &d); err != nil || d.Limits[0].Remaining != 10 {
		t.Errorf("after refusals: %+v, %v; want 10 remaining", d, err)
	}
}
