package local_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/local"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// Example builds an in-process limiter of 2 requests a minute and checks
// one client three times: the answers are those a limiterd node would give.
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
	cnt, err := counter.New(counter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	lim, err := limiter.New(cnt, rules)
	if err != nil {
		panic(err)
	}
	cfg := decision.DefaultConfig()
	// A fixed instant, for a reproducible output; time.Now in a service.
	cfg.Now = func() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }
	// The service's own registry in practice, where its metrics are served.
	dec, err := decision.New(cfg, lim, prometheus.NewRegistry(), nil)
	if err != nil {
		panic(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		panic(err)
	}

	for range 3 {
		d, err := lc.Check(context.Background(), client.Request{Key: "203.0.113.7"})
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry after %v; RateLimit-Policy: %s; RateLimit: %s\n",
			d.Allowed, d.Remaining, d.RetryAfter, d.Headers.Get("RateLimit-Policy"), d.Headers.Get("RateLimit"))
	}
	// Output:
	// allowed=true remaining=1 retry after 0s; RateLimit-Policy: "default";q=2;w=60; RateLimit: "default";r=1;t=60
	// allowed=true remaining=0 retry after 0s; RateLimit-Policy: "default";q=2;w=60; RateLimit: "default";r=0;t=60
	// allowed=false remaining=0 retry after 1m0s; RateLimit-Policy: "default";q=2;w=60; RateLimit: "default";r=0;t=60
}
