package whatif_test

import (
	"log"
	"os"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/whatif"
	"github.com/limiterd/limiterd/limiter"
)

// A log of four requests against a rule of one request per second per
// key: the second request of 192.0.2.1 within the second is rejected.
func Example() {
	rules := &limiter.RuleSet{Source: "example", Rules: []limiter.Rule{{
		Name:   "default",
		Limits: []limiter.LimitSpec{{Policy: "default", Limit: 1, Window: time.Second, Slices: 1}},
	}}}
	accessLog := `2026-07-28T09:00:00.000Z 192.0.2.1
2026-07-28T09:00:00.300Z 192.0.2.1
2026-07-28T09:00:00.400Z 192.0.2.2
2026-07-28T09:00:01.000Z 192.0.2.1
`
	cfg := whatif.Config{Rules: rules, Top: 10}
	rep, err := whatif.Run(cfg, strings.NewReader(accessLog), os.Stdout)
	if err != nil {
		log.Fatal(err)
	}
	if err := whatif.Write(os.Stdout, rep); err != nil {
		log.Fatal(err)
	}
	// Output:
	// what-if replay: 4 requests, 2 keys, 2026-07-28T09:00:00.000Z to 2026-07-28T09:00:01.000Z (1s)
	// on one node
	//
	// rule       mode       match      limits  requests  allowed  rejected  would reject  keys  keys rejected
	// default    enforce    (default)  1/1s           4        3         1             -     2              1
	// (no rule)  unlimited  -          -              0        0         -             -     0              -
	// total                                           4        3         1             0     2              1
	//
	// rule default rejected 1 of 4 requests (25.0%), from 1 of 2 keys
	// key        requests  rejected  share  first rejection
	// 192.0.2.1         3         1  33.3%  2026-07-28T09:00:00.300Z
}
