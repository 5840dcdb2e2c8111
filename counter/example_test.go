package counter_test

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
)

func Example() {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	// 3 requests per 10 s, counted in 10 slices of 1 s.
	lim, err := c.Limit("demo", 3, 10*time.Second, 10)
	if err != nil {
		panic(err)
	}
	t0 := time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC)
	var res [1]counter.Result
	for _, dt := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 10 * time.Second} {
		d, _ := c.Allow(t0.Add(dt), "client-42", 1, []counter.Limit{lim}, res[:])
		fmt.Printf("t0+%v allowed=%v remaining=%d retry_after=%v\n", dt, d.Allowed, res[0].Remaining, d.RetryAfter)
	}
	// Output:
	// t0+0s allowed=true remaining=2 retry_after=0s
	// t0+1s allowed=true remaining=1 retry_after=0s
	// t0+2s allowed=true remaining=0 retry_after=0s
	// t0+3s allowed=false remaining=0 retry_after=7s
	// t0+10s allowed=true remaining=0 retry_after=0s
}
