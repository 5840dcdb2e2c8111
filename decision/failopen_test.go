package decision

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// TestFailOpen: whatever goes wrong inside the Checker, Decide allows the
// request, flags it as internal, counts and logs it (NFR3).
func TestFailOpen(t *testing.T) {
	tests := []struct {
		name    string
		check   checkFunc
		wantLog string
	}{
		{"plain error", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			return errors.New("counter exploded")
		}, "counter exploded"},
		{"error after a partial write", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			*d = denied()
			return errors.New("half done")
		}, "half done"},
		{"panic", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			panic("boom")
		}, "decision: panic in Check: boom"},
		{"panic with an error value after a partial write", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			*d = denied()
			var m map[string]int
			m["x"]++ // assignment to entry in nil map
			return nil
		}, "nil map"},
		{"panic with an input sentinel is still internal", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			panic(limiter.ErrUnknownRule)
		}, "panic in Check: limiter: unknown rule"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf strings.Builder
			dec, reg := newTestDecider(t, tc.check, slog.New(slog.NewTextHandler(&logBuf, nil)))
			// Left over from an earlier request: Decide must overwrite all of it.
			res := Result{Decision: denied(), Outcome: OutcomeDenied}
			if err := dec.Decide(t.Context(), limiter.Request{Key: "secret-key", Rule: "api", Hits: 3}, &res); err != nil {
				t.Fatalf("Decide: %v, want nil (NFR3)", err)
			}
			want := Result{Decision: limiter.Decision{Allowed: true, WouldAllow: true}, Outcome: OutcomeError, Internal: true}
			if res != want {
				t.Errorf("Result %+v, want %+v", res, want)
			}
			if res.Primary() != -1 || len(res.Limits()) != 0 || res.RuleDenied() {
				t.Errorf("an internal error reports limits: Primary %d, %d limits, RuleDenied %v", res.Primary(), len(res.Limits()), res.RuleDenied())
			}
			log := logBuf.String()
			if !strings.Contains(log, tc.wantLog) || !strings.Contains(log, "level=ERROR") {
				t.Errorf("log %q does not report %q at ERROR", log, tc.wantLog)
			}
			if !strings.Contains(log, "rule=api") || !strings.Contains(log, "hits=3") {
				t.Errorf("log %q lacks the rule and hits of the request", log)
			}
			if strings.Contains(log, "secret-key") {
				t.Errorf("log %q contains the client key", log)
			}
			if got := value(t, reg, "limiterd_check_errors_total", nil); got != 1 {
				t.Errorf("limiterd_check_errors_total = %v, want 1", got)
			}
			if got := decisions(t, reg, "", "error"); got != 1 {
				t.Errorf(`limiterd_decisions_total{rule="",outcome="error"} = %v, want 1`, got)
			}
			// The failing check was timed too.
			if got := value(t, reg, "limiterd_check_duration_seconds", nil); got != 1 {
				t.Errorf("limiterd_check_duration_seconds count %v, want 1", got)
			}
		})
	}
}

func TestPanicLogIncludesStack(t *testing.T) {
	var logBuf strings.Builder
	dec, _ := newTestDecider(t, checkFunc(func(time.Time, limiter.Request, *limiter.Decision) error {
		panic("boom")
	}), slog.New(slog.NewTextHandler(&logBuf, nil)))
	var res Result
	if err := dec.Decide(t.Context(), limiter.Request{Key: "a", Hits: 1}, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logBuf.String(), "stack=") || !strings.Contains(logBuf.String(), "decision.(*Decider).check") {
		t.Errorf("log %q has no stack naming the recovering frame", logBuf.String())
	}
}

// TestErrorLogThrottle: at most one line a second of the Decider's clock,
// each with the number of failures suppressed since the one before.
func TestErrorLogThrottle(t *testing.T) {
	var mu sync.Mutex
	now := t0()
	var lines []string
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) {
		mu.Lock()
		lines = append(lines, string(p))
		mu.Unlock()
	}), nil))
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dec, reg := newTestDeciderCfg(t, cfg, answer(limiter.Decision{}, errors.New("broken")), log)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	fail := func(n int) {
		var res Result
		for range n {
			if err := dec.Decide(t.Context(), limiter.Request{Key: "k", Hits: 1}, &res); err != nil || !res.Internal {
				t.Fatalf("Decide: %v %+v", err, res)
			}
		}
	}
	steps := []struct {
		advance        time.Duration
		failures       int
		wantLines      int
		wantSuppressed string // in the last line
	}{
		{0, 1, 1, "suppressed=0"},
		{0, 5, 1, ""},                            // same instant: all five suppressed
		{999 * time.Millisecond, 3, 1, ""},       // still within the second
		{time.Millisecond, 2, 2, "suppressed=8"}, // a second after the first line
		{10 * time.Second, 1, 3, "suppressed=1"},
		{-time.Hour, 4, 3, ""}, // a clock that goes back logs nothing new until it catches up
	}
	total := 0
	for i, s := range steps {
		advance(s.advance)
		fail(s.failures)
		total += s.failures
		mu.Lock()
		got := append([]string(nil), lines...)
		mu.Unlock()
		if len(got) != s.wantLines {
			t.Fatalf("step %d: %d log lines, want %d: %q", i, len(got), s.wantLines, got)
		}
		if s.wantSuppressed != "" && !strings.Contains(got[len(got)-1], s.wantSuppressed) {
			t.Errorf("step %d: last line %q lacks %s", i, got[len(got)-1], s.wantSuppressed)
		}
	}
	// Throttling the log throttles nothing else: every failure is counted.
	if got := value(t, reg, "limiterd_check_errors_total", nil); got != float64(total) {
		t.Errorf("limiterd_check_errors_total = %v, want %d", got, total)
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }
