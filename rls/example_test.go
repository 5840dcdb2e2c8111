package rls_test

import (
	"context"
	"fmt"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/rls"
)

// An envoyproxy/ratelimit file, decided as Envoy asks: 2 a minute per
// client address. In limiterd, rls.NewServer serves the same Service over
// gRPC on -grpc-addr.
func Example() {
	rules, err := limiter.Parse("ratelimit.yaml", []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 2
`))
	if err != nil {
		panic(err)
	}
	ctr, _ := counter.New(counter.DefaultConfig())
	lim, _ := limiter.New(ctr, rules)
	reg := prometheus.NewRegistry()
	dec, _ := decision.New(decision.DefaultConfig(), lim, reg, nil)
	svc, _ := rls.New(rls.DefaultConfig(), dec, lim, reg, nil)

	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "198.51.100.7"}}},
	}}
	for range 3 {
		resp, _ := svc.ShouldRateLimit(context.Background(), req)
		st := resp.Statuses[0]
		fmt.Println(resp.OverallCode, st.CurrentLimit.RequestsPerUnit, st.CurrentLimit.Unit, st.LimitRemaining)
	}
	// Output:
	// OK 2 MINUTE 1
	// OK 2 MINUTE 0
	// OVER_LIMIT 2 MINUTE 0
}
