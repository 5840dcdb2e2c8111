package decision_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// Example decides four requests of one client against a limit of 2 per
// minute, as any frontend would: the frontend owns a Result (in practice
// pooled with its per-request state), calls Decide, and writes its answer
// from the Result. The last request names a rule that does not exist: bad
// input, an error, and no decision.
func Example() {
	rules, err := limiter.Parse("rules.yaml", []byte(`
rules:
  - name: default
    limit: 2
    window: 60s
`))
	if err != nil {
		panic(err)
	}
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	lim, err := limiter.New(c, rules)
	if err != nil {
		panic(err)
	}
	cfg := decision.DefaultConfig()
	cfg.Now = func() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }
	dec, err := decision.New(cfg, lim, prometheus.NewRegistry(), nil)
	if err != nil {
		panic(err)
	}

	var res decision.Result
	for _, req := range []limiter.Request{
		{Key: "203.0.113.7", Hits: 1},
		{Key: "203.0.113.7", Hits: 1},
		{Key: "203.0.113.7", Hits: 1},
		{Key: "203.0.113.7", Rule: "premium", Hits: 1},
	} {
		if err := dec.Decide(context.Background(), req, &res); err != nil {
			fmt.Printf("bad input (unknown rule: %v): %v\n", errors.Is(err, limiter.ErrUnknownRule), err)
			continue
		}
		d := &res.Decision
		fmt.Printf("%s: allowed=%v", res.Outcome, d.Allowed)
		if i := res.Primary(); i >= 0 {
			l := res.Limits()[i]
			fmt.Printf(" %s remaining=%d/%d", l.Policy, l.Remaining, l.Limit)
		}
		if res.RuleDenied() {
			fmt.Printf(" retry after %v", d.RetryAfter)
		}
		fmt.Println()
	}
	// Output:
	// allowed: allowed=true default remaining=1/2
	// allowed: allowed=true default remaining=0/2
	// denied: allowed=false default remaining=0/2 retry after 1m0s
	// bad input (unknown rule: true): unknown rule "premium"
}
