package decision

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

func TestKeyValidation(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		wantProblem string // "" when the key is valid
	}{
		{"address", "203.0.113.7", ""},
		{"exactly limiter.MaxKeyBytes", strings.Repeat("k", limiter.MaxKeyBytes), ""},
		{"multi-byte UTF-8 up to the limit", strings.Repeat("é", limiter.MaxKeyBytes/2), ""},
		{"spaces and separators are the frontend's business", " a:b/c ", ""},
		{"empty", "", "is empty"},
		{"one byte too long", strings.Repeat("k", limiter.MaxKeyBytes+1), "is longer than 1024 bytes"},
		{"length is in bytes, not runes", strings.Repeat("é", limiter.MaxKeyBytes/2+1), "is longer than 1024 bytes"},
		{"invalid UTF-8", "ab\xff", "is not valid UTF-8"},
		{"truncated sequence", "\xc3", "is not valid UTF-8"},
		{"surrogate half", "\xed\xa0\x80", "is not valid UTF-8"},
		{"too long wins over invalid", strings.Repeat("\xff", limiter.MaxKeyBytes+1), "is longer than 1024 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls int
			dec, reg := newTestDecider(t, checkFunc(func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
				calls++
				*d = allowed()
				return nil
			}), nil)
			res := Result{Decision: denied(), Outcome: OutcomeDenied, Internal: true} // left over from an earlier request
			err := dec.Decide(t.Context(), limiter.Request{Key: tc.key, Hits: 1}, &res)
			if tc.wantProblem == "" {
				if err != nil || calls != 1 {
					t.Fatalf("Decide: %v after %d Checker calls, want nil after 1", err, calls)
				}
				return
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Problem != tc.wantProblem {
				t.Fatalf("Decide: %v, want a *KeyError with Problem %q", err, tc.wantProblem)
			}
			if want := "key " + tc.wantProblem; err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
			if !errors.Is(err, limiter.ErrInvalidKey) {
				t.Errorf("%v does not match limiter.ErrInvalidKey", err)
			}
			if calls != 0 {
				t.Errorf("the Checker was asked about an invalid key")
			}
			if res != (Result{}) {
				t.Errorf("Result after bad input %+v, want the zero Result", res)
			}
			if got := value(t, reg, "limiterd_check_duration_seconds", nil); got != 0 {
				t.Errorf("an invalid key was timed as a check: %v", got)
			}
		})
	}
}

// TestErrorMapping: which Checker errors are bad input (returned, counting
// nothing) and which are internal (allowed).
func TestErrorMapping(t *testing.T) {
	hitsErr := fmt.Errorf("%w: hits 601 exceed the limit 600 of \"default\"", limiter.ErrInvalidHits)
	tests := []struct {
		name     string
		rule     string
		err      error
		wantKind error  // nil: internal, the request is allowed
		wantMsg  string // the message for the client
	}{
		{"unknown rule", "nope", fmt.Errorf("%w: %q", limiter.ErrUnknownRule, "nope"),
			limiter.ErrUnknownRule, `unknown rule "nope"`},
		{"unknown rule, long name is cut", strings.Repeat("r", 500), limiter.ErrUnknownRule,
			limiter.ErrUnknownRule, `unknown rule "` + strings.Repeat("r", 64) + `"...`},
		{"unknown rule with quotes", `a"b`, limiter.ErrUnknownRule,
			limiter.ErrUnknownRule, `unknown rule "a\"b"`},
		{"hits over a limit", "", hitsErr,
			limiter.ErrInvalidHits, `limiter: invalid hits: hits 601 exceed the limit 600 of "default"`},
		{"counter's hits sentinel counts as the limiter's", "", fmt.Errorf("%w: hits must be at least 1, got 0", counter.ErrInvalidHits),
			limiter.ErrInvalidHits, "counter: invalid hits: hits must be at least 1, got 0"},
		{"key refused by the Checker", "", fmt.Errorf("%w: key has a NUL", limiter.ErrInvalidKey),
			limiter.ErrInvalidKey, "limiter: invalid key: key has a NUL"},
		{"wrapped deeper still (errors.Is, not ==)", "", fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", limiter.ErrUnknownRule)),
			limiter.ErrUnknownRule, `unknown rule ""`},
		{"wrapped deeper: hits", "", fmt.Errorf("outer: %w", hitsErr),
			limiter.ErrInvalidHits, "outer: " + hitsErr.Error()},
		{"plain error", "", errors.New("counter exploded"), nil, ""},
		{"invalid rules are not the client's fault", "", fmt.Errorf("%w: oops", limiter.ErrInvalidRules), nil, ""},
		{"other counter errors are internal", "", counter.ErrTooManyLimits, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dec, reg := newTestDecider(t, answer(denied(), tc.err), nil)
			var res Result
			err := dec.Decide(t.Context(), limiter.Request{Key: "k", Rule: tc.rule, Hits: 1}, &res)
			if tc.wantKind == nil {
				if err != nil || !res.Internal || !res.Decision.Allowed {
					t.Fatalf("Decide: %v, %+v; want nil and an allowed internal error", err, res)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decide: nil, want bad input matching %v", tc.wantKind)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("message %q, want %q", err, tc.wantMsg)
			}
			// Exactly one of the limiter's sentinels, and the Checker's error.
			for _, s := range []error{limiter.ErrInvalidKey, limiter.ErrInvalidHits, limiter.ErrUnknownRule} {
				if errors.Is(err, s) != (s == tc.wantKind) {
					t.Errorf("errors.Is(%v, %v) = %v", err, s, !(s == tc.wantKind))
				}
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not match the Checker's error", err)
			}
			var ke *KeyError
			if errors.As(err, &ke) {
				t.Errorf("a Checker error is reported as a *KeyError")
			}
			if res != (Result{}) {
				t.Errorf("Result after bad input %+v, want the zero Result", res)
			}
			// Bad input is not a decision, and not an internal error.
			if got := value(t, reg, "limiterd_check_errors_total", nil); got != 0 {
				t.Errorf("limiterd_check_errors_total = %v, want 0", got)
			}
			for _, rule := range []string{"", "default"} {
				for o := range numOutcomes {
					if got := decisions(t, reg, rule, o.String()); got != 0 {
						t.Errorf("bad input counted as a decision: {rule=%q,outcome=%q} = %v", rule, o, got)
					}
				}
			}
			// The Checker was asked, so the check was timed.
			if got := value(t, reg, "limiterd_check_duration_seconds", nil); got != 1 {
				t.Errorf("limiterd_check_duration_seconds count %v, want 1", got)
			}
		})
	}
}

// TestBadInputCountsNothing runs bad input through the real limiter: the
// first real check afterwards still sees a full window.
func TestBadInputCountsNothing(t *testing.T) {
	lim := newRealLimiter(t, "rules:\n  - name: default\n    limit: 5\n    window: 60s\n")
	dec, _ := newTestDecider(t, lim, nil)
	var res Result
	for _, req := range []limiter.Request{
		{Key: "k", Hits: 6},
		{Key: "k", Hits: 0},
		{Key: "k", Rule: "nope", Hits: 1},
		{Key: "k\xff", Hits: 1},
	} {
		if err := dec.Decide(t.Context(), req, &res); err == nil {
			t.Errorf("%+v: nil error", req)
		}
	}
	if err := dec.Decide(t.Context(), limiter.Request{Key: "k", Hits: 1}, &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Decision.Limits[0].Remaining; got != 4 {
		t.Errorf("remaining %d after bad input, want 4", got)
	}
}
