package counter_test

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// A key reset on one node, and a peer's slice from before the reset that
// arrives after it: refused.
func ExampleCounter_Reset() {
	a, _ := counter.New(counter.DefaultConfig())
	if err := a.SetCluster(counter.DefaultClusterConfig("a")); err != nil {
		panic(err)
	}
	lim, _ := a.Limit("default", 600, time.Minute, 12)
	t := time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC)
	var res [1]counter.Result
	for range 5 {
		_, _ = a.Allow(t, "client-42", 1, []counter.Limit{lim}, res[:])
	}
	r, st, err := a.Reset(t.Add(time.Second), "client-42", []string{lim.ID()})
	fmt.Println("erased", st.Erased, "at", time.UnixMilli(r.At).UTC().Format("15:04:05.000"), err)

	late := []counter.Entry{{Limit: lim.ID(), Key: "client-42", Origin: "b", Start: t.UnixMilli(), Count: 3}}
	ms := a.Merge(t.Add(2*time.Second), late)
	_, _ = a.Peek(t.Add(2*time.Second), "client-42", 0, []counter.Limit{lim}, res[:])
	fmt.Println("late slice erased:", ms.Erased, "count:", res[0].Count)
	// Output:
	// erased 5 at 12:00:01.001 <nil>
	// late slice erased: 1 count: 0
}
