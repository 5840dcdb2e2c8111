package decision

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

func TestConfig(t *testing.T) {
	for _, cfg := range []Config{{}, DefaultConfig(), {Now: t0}} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", cfg, err)
		}
	}
	if DefaultConfig().Now == nil {
		t.Error("DefaultConfig has no clock")
	}
}

// TestZeroConfigUsesDefaults: the zero Config decides at time.Now.
func TestZeroConfigUsesDefaults(t *testing.T) {
	var got time.Time
	dec, err := New(Config{}, checkFunc(func(t time.Time, _ limiter.Request, d *limiter.Decision) error {
		got = t
		*d = allowed()
		return nil
	}), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	var res Result
	if err := dec.Decide(t.Context(), limiter.Request{Key: "k", Hits: 1}, &res); err != nil {
		t.Fatal(err)
	}
	if got.Before(before) {
		t.Errorf("check time %v is before the call: the default clock is not time.Now", got)
	}
}

// TestDecidePassesTheRequest: the Checker sees the request as given, at
// Config.Now, and its decision comes back unchanged.
func TestDecidePassesTheRequest(t *testing.T) {
	now := t0()
	var gotReq limiter.Request
	var gotT time.Time
	cfg := Config{Now: func() time.Time { return now }}
	dec, _ := newTestDeciderCfg(t, cfg, checkFunc(func(t time.Time, req limiter.Request, d *limiter.Decision) error {
		gotT, gotReq = t, req
		*d = twoLimits(false, true)
		return nil
	}), nil)
	req := limiter.Request{Key: "api:acme", Rule: "api", Hits: 7}
	var res Result
	for i := range 2 {
		now = now.Add(time.Duration(i) * time.Second)
		if err := dec.Decide(t.Context(), req, &res); err != nil {
			t.Fatal(err)
		}
		if gotReq != req || !gotT.Equal(now) {
			t.Errorf("call %d: Checker got %+v at %v, want %+v at %v", i, gotReq, gotT, req, now)
		}
	}
	want := Result{Decision: twoLimits(false, true), Outcome: OutcomeDenied}
	if res != want {
		t.Errorf("Result %+v, want %+v", res, want)
	}
}

// TestResultReuse: Decide overwrites every field of a reused Result, so a
// frontend can pool them.
func TestResultReuse(t *testing.T) {
	answers := []struct {
		d   limiter.Decision
		err error
	}{
		{twoLimits(false, false), nil},
		{limiter.Decision{}, errors.New("broken")},
		{allowed(), nil},
		{limiter.Decision{}, limiter.ErrUnknownRule},
		{limiter.Decision{Allowed: true, WouldAllow: true}, nil},
	}
	i := 0
	dec, _ := newTestDecider(t, checkFunc(func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
		a := answers[i]
		i++
		// A Checker overwrites every field, as the interface demands.
		*d = a.d
		return a.err
	}), nil)
	var res Result
	want := []Result{
		{Decision: twoLimits(false, false), Outcome: OutcomeDenied},
		{Decision: limiter.Decision{Allowed: true, WouldAllow: true}, Outcome: OutcomeError, Internal: true},
		{Decision: allowed(), Outcome: OutcomeAllowed},
		{},
		{Decision: limiter.Decision{Allowed: true, WouldAllow: true}, Outcome: OutcomeUnlimited},
	}
	for j, w := range want {
		_ = dec.Decide(t.Context(), limiter.Request{Key: "k", Hits: 1}, &res)
		if res != w {
			t.Errorf("request %d: %+v, want %+v", j, res, w)
		}
	}
}

// TestConcurrentDecide runs Decide from several goroutines over the real
// limiter: at one instant exactly the limit is allowed and every decision
// is counted once (the race detector watches too).
func TestConcurrentDecide(t *testing.T) {
	lim := newRealLimiter(t, "rules:\n  - name: default\n    limit: 600\n    window: 60s\n")
	dec, reg := newTestDecider(t, lim, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowedN := 0
	for w := range 8 {
		wg.Go(func() {
			var res Result
			for i := range 100 {
				// Half the goroutines share one key, the others have one each.
				key := "shared"
				if w%2 == 1 {
					key = "own-" + strconv.Itoa(w)
				}
				if err := dec.Decide(t.Context(), limiter.Request{Key: key, Hits: 1}, &res); err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
				if key == "shared" && res.Decision.Allowed {
					mu.Lock()
					allowedN++
					mu.Unlock()
				}
				if key != "shared" && (!res.Decision.Allowed || res.Decision.Limits[0].Remaining != int64(600-i-1)) {
					t.Errorf("%s request %d: %+v", key, i, res.Decision)
					return
				}
			}
		})
	}
	wg.Wait()
	if allowedN != 400 {
		t.Errorf("shared key: %d allowed, want 400 (4 goroutines x 100 under a limit of 600)", allowedN)
	}
	if got := decisions(t, reg, "default", "allowed"); got != 800 {
		t.Errorf("allowed decisions %v, want 800", got)
	}
}

// TestDecideDoesNotAllocate: a tracked key costs no allocation, which
// keeps the frontends' hot path allocation-free.
func TestDecideDoesNotAllocate(t *testing.T) {
	lim := newRealLimiter(t, benchRules)
	ms := int64(0)
	dec, _ := newTestDeciderCfg(t, Config{Now: func() time.Time { return t0().Add(time.Duration(ms) * time.Millisecond) }}, lim, nil)
	for _, req := range []limiter.Request{
		{Key: "203.0.113.7", Hits: 1},
		{Key: "api:acme", Hits: 1},
		{Key: "203.0.113.7", Rule: "api", Hits: 1},
		{Key: "small:x", Hits: 1}, // denied after the first
	} {
		var res Result
		ms += 60_000 // a fresh window for every request
		if err := dec.Decide(t.Context(), req, &res); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(200, func() {
			ms += 150 // under the tightest limit (10/s) that should allow
			if err := dec.Decide(t.Context(), req, &res); err != nil || res.Internal {
				t.Fatalf("%v %+v", err, res)
			}
		})
		if allocs != 0 {
			t.Errorf("Decide(%+v) allocates %v times per call", req, allocs)
		}
	}
}
