package limiter

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// at is the instant ms milliseconds after a fixed origin: tests step
// through fixed instants and never read the clock.
func at(ms int64) time.Time { return time.UnixMilli(1_767_225_600_000 + ms) }

func newCounter(t testing.TB) *counter.Counter {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustParse(t testing.TB, yaml string) *RuleSet {
	t.Helper()
	rs, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func newLimiter(t testing.TB, yaml string) *Limiter {
	t.Helper()
	l, err := New(newCounter(t), mustParse(t, yaml))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func shippedLimiter(t testing.TB) *Limiter {
	t.Helper()
	rs, err := Load(filepath.Join("..", "testdata", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(newCounter(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// step is a check (repeated times times at the same instant) and what the
// last of them must decide.
type step struct {
	at    int64 // ms after the origin
	key   string
	rule  string
	hits  int64 // 0 means 1
	times int   // 0 means 1
	// want, for the last repetition
	allowed, wouldAllow bool
	decider             string
	limitOK             []bool  // per limit: had room
	remaining           []int64 // per limit
	retryAfter          time.Duration
}

func runSteps(t *testing.T, l *Limiter, steps []step) {
	t.Helper()
	for i, s := range steps {
		hits := max(s.hits, 1)
		var d Decision
		for range max(s.times, 1) {
			if err := l.Check(at(s.at), Request{Key: s.key, Rule: s.rule, Hits: hits}, &d); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if d.Allowed != s.allowed || d.WouldAllow != s.wouldAllow || d.Rule != s.decider {
			t.Errorf("step %d (t=%dms %q): Allowed %v WouldAllow %v Rule %q; want %v %v %q",
				i, s.at, s.key, d.Allowed, d.WouldAllow, d.Rule, s.allowed, s.wouldAllow, s.decider)
		}
		if d.RetryAfter != s.retryAfter {
			t.Errorf("step %d: RetryAfter %v, want %v", i, d.RetryAfter, s.retryAfter)
		}
		if d.N != len(s.remaining) {
			t.Fatalf("step %d: N = %d, want %d", i, d.N, len(s.remaining))
		}
		for j := range d.N {
			if d.Limits[j].Remaining != s.remaining[j] || d.Limits[j].Allowed != s.limitOK[j] {
				t.Errorf("step %d limit %s: Allowed %v Remaining %d; want %v %d",
					i, d.Limits[j].Policy, d.Limits[j].Allowed, d.Limits[j].Remaining, s.limitOK[j], s.remaining[j])
			}
		}
	}
}

func TestCheckMultiLimit(t *testing.T) {
	t.Run("denied by the 1s limit, the 60s limit is not consumed", func(t *testing.T) {
		l := shippedLimiter(t) // api: 10/1s and 600/60s
		both, only60 := []bool{true, true}, []bool{false, true}
		runSteps(t, l, []step{
			{at: 0, key: "api:k", times: 10, allowed: true, wouldAllow: true, decider: "api", limitOK: both, remaining: []int64{0, 590}},
			// The 11th within the second: the 1s limit has no room. The
			// 60s limit had room but is not charged: 590 stays 590.
			{at: 10, key: "api:k", decider: "api", limitOK: only60, remaining: []int64{0, 590}, retryAfter: 990 * time.Millisecond},
			{at: 500, key: "api:k", times: 5, decider: "api", limitOK: only60, remaining: []int64{0, 590}, retryAfter: 500 * time.Millisecond},
			// A second later the 1s window is free, and the 60s limit shows
			// 10+1 counted: none of the six denied requests.
			{at: 1000, key: "api:k", allowed: true, wouldAllow: true, decider: "api", limitOK: both, remaining: []int64{9, 589}},
		})
	})
	t.Run("denied by the 60s limit, the 1s limit is not consumed", func(t *testing.T) {
		l := newLimiter(t, "rules:\n  - name: m\n    limits:\n      - {limit: 5, window: 1s}\n      - {limit: 8, window: 60s}\n")
		both, only1 := []bool{true, true}, []bool{true, false}
		runSteps(t, l, []step{
			{at: 0, key: "k", times: 5, allowed: true, wouldAllow: true, decider: "m", limitOK: both, remaining: []int64{0, 3}},
			{at: 1000, key: "k", times: 3, allowed: true, wouldAllow: true, decider: "m", limitOK: both, remaining: []int64{2, 0}},
			{at: 2000, key: "k", times: 6, decider: "m", limitOK: only1, remaining: []int64{5, 0}, retryAfter: 58 * time.Second},
			// The first five leave the 60s window at 60s; the 1s limit
			// still has all 5 (the six denied were not counted there).
			{at: 60000, key: "k", allowed: true, wouldAllow: true, decider: "m", limitOK: both, remaining: []int64{4, 4}},
		})
	})
	t.Run("hits count against every limit", func(t *testing.T) {
		l := shippedLimiter(t)
		runSteps(t, l, []step{
			{at: 0, key: "api:h", hits: 7, allowed: true, wouldAllow: true, decider: "api", limitOK: []bool{true, true}, remaining: []int64{3, 593}},
			{at: 1, key: "api:h", hits: 4, decider: "api", limitOK: []bool{false, true}, remaining: []int64{3, 593}, retryAfter: 999 * time.Millisecond},
			{at: 2, key: "api:h", hits: 3, allowed: true, wouldAllow: true, decider: "api", limitOK: []bool{true, true}, remaining: []int64{0, 590}},
		})
	})
}

func TestCheckDecisionFields(t *testing.T) {
	l := shippedLimiter(t)
	var d Decision
	if err := l.Check(at(0), Request{Key: "api:f", Hits: 1}, &d); err != nil {
		t.Fatal(err)
	}
	want := [2]LimitResult{
		{Policy: "api/1s", Limit: 10, Window: time.Second, Allowed: true, Remaining: 9, Reset: time.Second},
		{Policy: "api/60s", Limit: 600, Window: time.Minute, Allowed: true, Remaining: 599, Reset: time.Minute},
	}
	if d.N != 2 || d.Limits[0] != want[0] || d.Limits[1] != want[1] || d.Shadow || d.Untracked {
		t.Fatalf("got %+v", d)
	}
	// A later check on a one-limit rule overwrites every field.
	if err := l.Check(at(0), Request{Key: "premium:f", Hits: 1}, &d); err != nil {
		t.Fatal(err)
	}
	if d.N != 1 || d.Limits[1] != (LimitResult{}) || d.Limits[0].Policy != "premium" {
		t.Fatalf("stale fields after reuse: %+v", d)
	}
}

func TestCheckShadow(t *testing.T) {
	l := newLimiter(t, "rules:\n  - {name: trial, limit: 3, window: 1s, shadow: true}\n")
	ok := []bool{true}
	runSteps(t, l, []step{
		{at: 0, key: "k", times: 3, allowed: true, wouldAllow: true, decider: "trial", limitOK: ok, remaining: []int64{0}},
		// Over the limit: allowed anyway, but WouldAllow tells the truth.
		{at: 1, key: "k", times: 2, allowed: true, decider: "trial", limitOK: []bool{false}, remaining: []int64{0}, retryAfter: 999 * time.Millisecond},
		// Counting goes on as for an enforcing rule: the window slides, and
		// the would-be-denied requests were not counted.
		{at: 1000, key: "k", times: 3, allowed: true, wouldAllow: true, decider: "trial", limitOK: ok, remaining: []int64{0}},
		{at: 1001, key: "k", allowed: true, decider: "trial", limitOK: []bool{false}, remaining: []int64{0}, retryAfter: 999 * time.Millisecond},
	})
	var d Decision
	if err := l.Check(at(1002), Request{Key: "k", Hits: 1}, &d); err != nil || !d.Shadow {
		t.Fatalf("Shadow not reported: %+v, %v", d, err)
	}
}

func TestCheckRuleResolution(t *testing.T) {
	const rules = `rules:
  - {name: vip, match: "user:vip-*", limit: 100, window: 1s}
  - {name: users, match: "user:*", limit: 10, window: 1s}
  - {name: one, match: "id:?", limit: 5, window: 1s}
  - {name: default, limit: 1, window: 1s}
  - {name: spare, match: "spare:*", limit: 2, window: 1s}
`
	noDefault := "rules:\n  - {name: users, match: \"user:*\", limit: 10, window: 1s}\n"
	tests := []struct {
		rules    string
		key      string
		rule     string
		decision string
		limit    int64
	}{
		{rules, "user:vip-7", "", "vip", 100},       // first match in file order
		{rules, "user:bob", "", "users", 10},        // the later, more general pattern
		{rules, "id:é", "", "one", 5},               // ? is one character
		{rules, "id:42", "", "default", 1},          // no pattern matches: the default
		{rules, "spare:x", "", "spare", 2},          // a rule after the default still matches
		{rules, "user:vip-7", "users", "users", 10}, // rule= wins over the patterns
		{rules, "unrelated", "spare", "spare", 2},   // rule= ignores the pattern
		{rules, "anything", "default", "default", 1},
		{noDefault, "user:x", "", "users", 10},
		{noDefault, "other", "", "", 0}, // no rule governs it
	}
	for _, tt := range tests {
		t.Run(tt.key+"/"+tt.rule, func(t *testing.T) {
			l := newLimiter(t, tt.rules)
			var d Decision
			if err := l.Check(at(0), Request{Key: tt.key, Rule: tt.rule, Hits: 1}, &d); err != nil {
				t.Fatal(err)
			}
			if d.Rule != tt.decision {
				t.Fatalf("decided by %q, want %q", d.Rule, tt.decision)
			}
			if tt.decision == "" {
				if !d.Allowed || !d.WouldAllow || d.N != 0 {
					t.Fatalf("ungoverned key: %+v, want allowed with no limits", d)
				}
				return
			}
			if d.N != 1 || d.Limits[0].Limit != tt.limit || !d.Allowed {
				t.Fatalf("got %+v, want limit %d", d, tt.limit)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	l := shippedLimiter(t)
	tests := []struct {
		name    string
		req     Request
		is      []error
		message string
	}{
		{"empty key", Request{Key: "", Hits: 1}, []error{ErrInvalidKey}, "key is empty"},
		{"long key", Request{Key: strings.Repeat("k", MaxKeyBytes+1), Hits: 1}, []error{ErrInvalidKey}, "key is longer than 1024 bytes"},
		{"bad UTF-8", Request{Key: "api:\xff", Hits: 1}, []error{ErrInvalidKey}, "key is not valid UTF-8"},
		{"zero hits", Request{Key: "k", Hits: 0}, []error{ErrInvalidHits, counter.ErrInvalidHits}, "hits must be at least 1, got 0"},
		{"negative hits", Request{Key: "k", Hits: -3}, []error{ErrInvalidHits, counter.ErrInvalidHits}, "hits must be at least 1, got -3"},
		{"hits over the smallest limit", Request{Key: "api:k", Hits: 11}, []error{ErrInvalidHits, counter.ErrInvalidHits}, `hits 11 exceed the limit 10 of "api/1s"`},
		{"hits over the only limit", Request{Key: "k", Hits: 601}, []error{ErrInvalidHits}, `hits 601 exceed the limit 600 of "default"`},
		{"hits over a selected rule", Request{Key: "k", Rule: "api", Hits: 11}, []error{ErrInvalidHits}, `exceed the limit 10 of "api/1s"`},
		{"unknown rule", Request{Key: "k", Rule: "nope", Hits: 1}, []error{ErrUnknownRule}, `limiter: unknown rule: "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decision{Allowed: true, Rule: "stale", N: 1}
			err := l.Check(at(0), tt.req, &d)
			if err == nil {
				t.Fatal("no error")
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("%q does not match %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tt.message) || !strings.HasPrefix(err.Error(), "limiter: ") {
				t.Errorf("message %q, want it to contain %q", err, tt.message)
			}
			if d != (Decision{}) {
				t.Errorf("Decision not zeroed on error: %+v", d)
			}
		})
	}
	// The edges that are valid.
	var d Decision
	for _, req := range []Request{
		{Key: strings.Repeat("k", MaxKeyBytes), Hits: 1},
		{Key: "api:edge", Hits: 10},
		{Key: "é", Hits: 600},
	} {
		if err := l.Check(at(0), req, &d); err != nil || !d.Allowed {
			t.Errorf("Check(%.20q, hits %d): %v, allowed %v", req.Key, req.Hits, err, d.Allowed)
		}
	}
	// Nothing was counted by the failed checks.
	if err := l.Check(at(0), Request{Key: "api:k", Hits: 10}, &d); err != nil || !d.Allowed {
		t.Fatalf("api:k after failed checks: %v, %+v", err, d)
	}
}

func TestCheckUntracked(t *testing.T) {
	c, err := counter.New(counter.Config{Shards: 1, MaxKeys: 1, Tolerance: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(c, mustParse(t, "rules:\n  - {name: d, limit: 1, window: 1s, slices: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var d Decision
	if err := l.Check(at(0), Request{Key: "a", Hits: 1}, &d); err != nil || !d.Allowed || d.Untracked {
		t.Fatalf("first key: %v %+v", err, d)
	}
	// The counter is full: the next key passes uncounted, and says so.
	for range 3 {
		if err := l.Check(at(1), Request{Key: "b", Hits: 1}, &d); err != nil || !d.Allowed || !d.WouldAllow || !d.Untracked || d.Rule != "d" {
			t.Fatalf("untracked key: %v %+v", err, d)
		}
	}
}

func TestSetRulesKeepsCounts(t *testing.T) {
	l := newLimiter(t, "rules:\n  - {name: d, limit: 5, window: 1s}\n")
	var d Decision
	check := func(ms int64) Decision {
		t.Helper()
		if err := l.Check(at(ms), Request{Key: "k", Hits: 1}, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 5 {
		check(0)
	}
	if check(1).Allowed {
		t.Fatal("6th request allowed under limit 5")
	}
	// Same name, window and slices, higher limit: the 5 counted stay.
	if err := l.SetRules(mustParse(t, "rules:\n  - {name: d, limit: 6, window: 1s}\n")); err != nil {
		t.Fatal(err)
	}
	if d := check(2); !d.Allowed || d.Limits[0].Remaining != 0 || d.Limits[0].Limit != 6 {
		t.Fatalf("after raising the limit: %+v, want the 6th allowed with 0 left", d)
	}
	if check(3).Allowed {
		t.Fatal("7th request allowed under limit 6: counts were lost")
	}
	// Lower limit: already over it, so denied at once.
	if err := l.SetRules(mustParse(t, "rules:\n  - {name: d, limit: 2, window: 1s}\n")); err != nil {
		t.Fatal(err)
	}
	if d := check(4); d.Allowed || d.Limits[0].Remaining != 0 {
		t.Fatalf("after lowering the limit: %+v", d)
	}
	// A new window is a new count.
	if err := l.SetRules(mustParse(t, "rules:\n  - {name: d, limit: 2, window: 2s}\n")); err != nil {
		t.Fatal(err)
	}
	if d := check(5); !d.Allowed || d.Limits[0].Remaining != 1 {
		t.Fatalf("after changing the window: %+v, want a fresh count", d)
	}
	// Back to the old window: its counts were kept in the counter all along.
	if err := l.SetRules(mustParse(t, "rules:\n  - {name: d, limit: 6, window: 1s}\n")); err != nil {
		t.Fatal(err)
	}
	if check(6).Allowed {
		t.Fatal("the 1s window forgot its 6 requests")
	}
}

func TestSetRulesInvalidKeepsOld(t *testing.T) {
	l := newLimiter(t, "rules:\n  - {name: d, limit: 1, window: 1s}\n")
	old := l.Rules()
	bad := []*RuleSet{
		nil,
		{Source: "empty"},
		{Rules: []Rule{{Name: "d", Limits: []LimitSpec{{Policy: "d", Limit: 0, Window: time.Second, Slices: 1}}}}},
	}
	for _, rs := range bad {
		if err := l.SetRules(rs); !errors.Is(err, ErrInvalidRules) {
			t.Errorf("SetRules(%+v) = %v, want ErrInvalidRules", rs, err)
		}
		if l.Rules() != old {
			t.Fatal("an invalid rule set replaced the rules")
		}
	}
	var d Decision
	if err := l.Check(at(0), Request{Key: "k", Hits: 1}, &d); err != nil || !d.Allowed || d.Limits[0].Limit != 1 {
		t.Fatalf("old rules not in force: %v %+v", err, d)
	}
	if err := l.Check(at(0), Request{Key: "k", Hits: 1}, &d); err != nil || d.Allowed {
		t.Fatalf("old limit 1 not enforced: %v %+v", err, d)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, mustParse(t, "rules:\n  - {name: d, limit: 1, window: 1s}\n")); err == nil {
		t.Fatal("New accepted a nil counter")
	}
	if _, err := New(newCounter(t), nil); !errors.Is(err, ErrInvalidRules) {
		t.Fatalf("New(nil rules) = %v, want ErrInvalidRules", err)
	}
}

// TestConcurrentCheckAndSetRules runs Checks from several goroutines while
// the rules flip between two sets; run with -race. Each decision must come
// wholly from one of the two sets.
func TestConcurrentCheckAndSetRules(t *testing.T) {
	a := mustParse(t, "rules:\n  - {name: a, limit: 100, window: 1s}\n")
	b := mustParse(t, "rules:\n  - name: a\n    limits:\n      - {limit: 50, window: 1s}\n      - {limit: 1000, window: 60s}\n")
	l, err := New(newCounter(t), a)
	if err != nil {
		t.Fatal(err)
	}
	const workers, checks, reloads = 4, 2000, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d Decision
			for i := range checks {
				key := fmt.Sprintf("k%d-%d", w, i%7)
				if err := l.Check(at(int64(i)), Request{Key: key, Hits: 1}, &d); err != nil {
					errs <- err
					return
				}
				consistent := d.N == 1 && d.Limits[0].Limit == 100 && d.Limits[0].Policy == "a" ||
					d.N == 2 && d.Limits[0].Limit == 50 && d.Limits[1].Limit == 1000 && d.Limits[1].Policy == "a/60s"
				if !consistent {
					errs <- fmt.Errorf("decision mixes rule sets: %+v", d)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range reloads {
			rs := a
			if i%2 == 0 {
				rs = b
			}
			if err := l.SetRules(rs); err != nil {
				errs <- err
				return
			}
			if got := l.Rules(); got != a && got != b {
				errs <- errors.New("Rules returned a set never set")
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	l := shippedLimiter(t)
	var d Decision
	ms := int64(0) // time only moves forward, across all the keys
	for _, key := range []string{"default-client", "premium:acme", "api:key-42"} {
		for _, rule := range []string{"", "api"} {
			req := Request{Key: key, Rule: rule, Hits: 1}
			ms += 60_000 // a fresh window for every key and rule
			if err := l.Check(at(ms), req, &d); err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(200, func() {
				ms += 150 // under every limit, so each check is counted
				if err := l.Check(at(ms), req, &d); err != nil || !d.Allowed {
					t.Fatalf("%v %+v", err, d)
				}
			})
			if allocs != 0 {
				t.Errorf("Check(%q, rule %q) allocates %v times per call", key, rule, allocs)
			}
		}
	}
}

// BenchmarkCheck measures one check of a tracked key under each kind of
// rule of the shipped file. Time advances just slower than the tightest
// limit (10/s), so every check is allowed and counted: the full path.
func BenchmarkCheck(b *testing.B) {
	for _, key := range []string{"default-client", "premium:acme", "api:key-42"} {
		b.Run(key, func(b *testing.B) {
			l := shippedLimiter(b)
			req := Request{Key: key, Hits: 1}
			var d Decision
			b.ReportAllocs()
			ms := int64(0)
			for b.Loop() {
				ms += 101
				if err := l.Check(at(ms), req, &d); err != nil || !d.Allowed {
					b.Fatal(err, d.Allowed)
				}
			}
		})
	}
}

// BenchmarkCheckParallel is the daemon's shape: many goroutines, many keys.
func BenchmarkCheckParallel(b *testing.B) {
	l := shippedLimiter(b)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("api:client-%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var d Decision
		i := 0
		for pb.Next() {
			i++
			if err := l.Check(at(int64(i)), Request{Key: keys[i%len(keys)], Hits: 1}, &d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestKeyProblem is the one check of a key, which Check and the decision
// layer share: every problem, in order, and no allocation for a good key.
func TestKeyProblem(t *testing.T) {
	for _, tc := range []struct {
		name, key, want string
	}{
		{"address", "203.0.113.7", ""},
		{"exactly MaxKeyBytes", strings.Repeat("k", MaxKeyBytes), ""},
		{"empty", "", "is empty"},
		{"one byte too long", strings.Repeat("k", MaxKeyBytes+1), "is longer than 1024 bytes"},
		{"invalid UTF-8", "ab\xff", "is not valid UTF-8"},
		{"too long wins over invalid", strings.Repeat("\xff", MaxKeyBytes+1), "is longer than 1024 bytes"},
	} {
		if got := KeyProblem(tc.key); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	key := strings.Repeat("é", MaxKeyBytes/2)
	if n := testing.AllocsPerRun(100, func() { _ = KeyProblem(key) }); n != 0 {
		t.Errorf("a valid key: %v allocations, want 0", n)
	}
}
