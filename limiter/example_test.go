package limiter_test

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

func Example() {
	rules, err := limiter.Parse("rules.yaml", []byte(`
rules:
  - name: default
    limit: 600
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 2, window: 1s}
      - {limit: 600, window: 60s}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := limiter.New(c, rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	t0 := time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC)
	var d limiter.Decision
	for i := range 3 {
		// The time is an argument: a real caller passes time.Now() or uses CheckNow.
		if err := l.Check(t0.Add(time.Duration(i)*time.Millisecond), limiter.Request{Key: "api:key-42", Hits: 1}, &d); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%v rule=%s retry-after=%v\n", d.Allowed, d.Rule, d.RetryAfter)
		for _, r := range d.Limits[:d.N] {
			fmt.Printf("  %s: %d of %d left\n", r.Policy, r.Remaining, r.Limit)
		}
	}
	// Output:
	// allowed=true rule=api retry-after=0s
	//   api/1s: 1 of 2 left
	//   api/60s: 599 of 600 left
	// allowed=true rule=api retry-after=0s
	//   api/1s: 0 of 2 left
	//   api/60s: 598 of 600 left
	// allowed=false rule=api retry-after=998ms
	//   api/1s: 0 of 2 left
	//   api/60s: 598 of 600 left
}

func ExampleParse_error() {
	_, err := limiter.Parse("rules.yaml", []byte(`
rules:
  - name: default
    limt: 600
    window: 60s
`))
	fmt.Println(err)
	// Output:
	// limiter: invalid rules: 2 problems:
	//   rules.yaml:3: rule "default": field "limit": missing
	//   rules.yaml:4: rule "default": field "limt": unknown field (known fields: name, match, limit, window, slices, shadow, limits)
}

// Bounds shows what the cluster keeps each limit in force within: on 8
// nodes with the key's coordinator deciding at the margin, a minute's 600
// and 2 per second both stay within 1.1x.
func ExampleLimiter_Bounds() {
	rules, err := limiter.Parse("rules.yaml", []byte(`
rules:
  - name: default
    limit: 600
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 2, window: 1s}
      - {limit: 600, window: 60s}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	cc := counter.DefaultClusterConfig("node-1")
	cc.Nodes = 8
	if err := c.SetCluster(cc); err != nil {
		fmt.Println(err)
		return
	}
	l, err := limiter.New(c, rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range l.Bounds() {
		fmt.Printf("%s %s: at most %d (%.3fx)\n", b.Rule, b.LimitText(), b.WorstCase, b.Ratio())
	}
	// Output:
	// default 600/60s: at most 660 (1.100x)
	// api 2/1s: at most 2 (1.000x)
	// api 600/60s: at most 660 (1.100x)
}
