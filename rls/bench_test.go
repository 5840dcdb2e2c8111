package rls

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
)

const benchEnvoy = `domain: bench
descriptors:
  - key: client
    rate_limit:
      unit: minute
      requests_per_unit: 2147483647
`

const benchOurs = `rules:
  - name: default
    limit: 2147483647
    window: 60s
`

// BenchmarkFrontends compares a ShouldRateLimit over gRPC with a GET
// /check over HTTP/1.1 keep-alive, both on loopback against one process,
// one limiter (with a decision layer each: they register the same metrics), 1,024 client keys taking turns and
// never denied: what the protocol costs, the decision being the same.
// -cpu sets the client parallelism with the server's (RunParallel).
func BenchmarkFrontends(b *testing.B) {
	b0 := build(b, DefaultConfig(), nil, nil, "envoy.yaml", benchEnvoy, "rules.yaml", benchOurs)
	gaddr := serve(b, b0.svc)
	dec, err := decision.New(decision.DefaultConfig(), b0.lim, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	api, err := httpapi.New(httpapi.DefaultConfig(), dec, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: api}
	go hs.Serve(hln)
	defer hs.Close()

	var keys [1024]string
	for i := range keys {
		keys[i] = fmt.Sprintf("client-%d", i)
	}
	b.Run("grpc", func(b *testing.B) {
		c := dial(b, gaddr)
		var n atomic.Uint64
		b.SetParallelism(8) // 8 clients a CPU: a proxy fleet, not one caller
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := keys[n.Add(1)%uint64(len(keys))]
				resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "bench",
					Descriptors: []*commonv3.RateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "client", Value: k}}}}})
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Errorf("%v %v", resp, err)
					return
				}
			}
		})
	})
	b.Run("http", func(b *testing.B) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		base := "http://" + hln.Addr().String() + "/check?key="
		var n atomic.Uint64
		b.SetParallelism(8) // 8 clients a CPU: a proxy fleet, not one caller
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := keys[n.Add(1)%uint64(len(keys))]
				resp, err := hc.Get(base + k)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	})
}
