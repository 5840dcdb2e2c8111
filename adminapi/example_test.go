package adminapi_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/adminapi"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// A single node's admin API: inspect a key, reset it, inspect it again.
func Example() {
	c, _ := counter.New(counter.DefaultConfig())
	rs, _ := limiter.Parse("rules.yaml", []byte("rules:\n  - {name: default, limit: 600, window: 60s}\n"))
	lim, _ := limiter.New(c, rs)
	now := time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	api, err := adminapi.New(adminapi.DefaultConfig(), lim, adminapi.Alone(c, clock), prometheus.NewRegistry(), nil)
	if err != nil {
		panic(err)
	}
	var d limiter.Decision
	for range 42 {
		_ = lim.Check(now, limiter.Request{Key: "client-42", Hits: 1}, &d)
	}
	for _, method := range []string{"GET", "DELETE", "GET"} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(method, "/v1/keys?key=client-42", nil))
		fmt.Print(method, " ", rec.Code, " ", rec.Body)
	}
	// Output:
	// GET 200 {"key":"client-42","rule":"default","limits":[{"policy":"default","limit":600,"window_ms":60000,"count":42,"remaining":558,"reset_ms":60000}]}
	// DELETE 200 {"key":"client-42","rule":"default","limits":[{"policy":"default","limit":600,"window_ms":60000}],"reset_at":"2026-07-30T12:00:00.001Z"}
	// GET 200 {"key":"client-42","rule":"default","limits":[{"policy":"default","limit":600,"window_ms":60000,"count":0,"remaining":600,"reset_ms":0}]}
}
