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

// WorstCase tells whether a limit keeps the 1.1x promise in a cluster. With
// the coordinator deciding at the margin (the default) every limit does, a
// limit of 10 per second on 8 nodes too; with the per-node budget alone
// (what a node falls back to when the coordinator cannot be reached) a 10 s
// window and a limit of 10 per second do not.
func ExampleCounter_WorstCase() {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		panic(err)
	}
	fmt.Println("one node, 600 per minute:", c.WorstCase(600, time.Minute))
	cc := counter.DefaultClusterConfig("node-1")
	cc.Nodes = 8
	if err := c.SetCluster(cc); err != nil {
		panic(err)
	}
	fmt.Println("8 nodes, 600 per minute:", c.WorstCase(600, time.Minute))
	fmt.Println("8 nodes, 600 per 10 s:", c.WorstCase(600, 10*time.Second))
	fmt.Println("8 nodes, 10 per second:", c.WorstCase(10, time.Second))
	cc.Coordinated = false
	if err := c.SetCluster(cc); err != nil {
		panic(err)
	}
	fmt.Println("budget alone, 600 per minute:", c.WorstCase(600, time.Minute))
	fmt.Println("budget alone, 600 per 10 s:", c.WorstCase(600, 10*time.Second))
	fmt.Println("budget alone, 10 per second:", c.WorstCase(10, time.Second))
	// Output:
	// one node, 600 per minute: 660
	// 8 nodes, 600 per minute: 660
	// 8 nodes, 600 per 10 s: 660
	// 8 nodes, 10 per second: 10
	// budget alone, 600 per minute: 640
	// budget alone, 600 per 10 s: 736
	// budget alone, 10 per second: 34
}
