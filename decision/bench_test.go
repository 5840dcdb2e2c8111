package decision

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// benchRules never deny the default rule, have a two-limit rule to show the
// multi-limit path, and deny "small" keys after their first request.
const benchRules = `
rules:
  - name: small
    match: "small:*"
    limit: 1
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s}
  - name: default
    limit: 2147483647
    window: 60s
`

// BenchmarkDecide measures Decide of a key that is already tracked, over the
// real limiter: it must report 0 allocs/op.
func BenchmarkDecide(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  limiter.Request
		step time.Duration // the clock's advance per request
	}{
		// Slower than the tightest limit (10/s), so the allowed cases stay
		// allowed and are counted: the full path.
		{"allowed", limiter.Request{Key: "203.0.113.7", Hits: 1}, 101 * time.Millisecond},
		{"two-limits", limiter.Request{Key: "api:acme", Hits: 1}, 101 * time.Millisecond},
		// At one instant, so that every request after the first is denied.
		{"denied", limiter.Request{Key: "small:x", Hits: 1}, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			lim := newRealLimiter(b, benchRules)
			now := t0()
			dec, _ := newTestDeciderCfg(b, Config{Now: func() time.Time { return now }}, lim, nil)
			var res Result
			if err := dec.Decide(b.Context(), tc.req, &res); err != nil { // track the key
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(tc.step)
				if err := dec.Decide(b.Context(), tc.req, &res); err != nil {
					b.Fatal(err)
				}
			}
			if res.Internal || res.Decision.Allowed != (tc.step > 0) {
				b.Fatalf("unexpected last decision: %+v", res)
			}
		})
	}
}
