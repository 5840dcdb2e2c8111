package httpapi_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
	"github.com/limiterd/limiterd/limiter"
)

// Example serves /check over a limiter of 2 requests per minute and asks
// three times for one client, the way Traefik's ForwardAuth would: a GET
// carrying the client's address in X-Forwarded-For. The Decider and the API
// share one registry, so /metrics serves the metrics of both.
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
	reg := prometheus.NewRegistry()
	dcfg := decision.DefaultConfig()
	dcfg.Now = func() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }
	dec, err := decision.New(dcfg, lim, reg, nil)
	if err != nil {
		panic(err)
	}
	api, err := httpapi.New(httpapi.DefaultConfig(), dec, reg, nil)
	if err != nil {
		panic(err)
	}

	for range 3 {
		r := httptest.NewRequest("GET", "/check", nil)
		r.Header.Set("X-Forwarded-For", "203.0.113.7, 10.0.0.1")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
		fmt.Print(w.Body)
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=60 Retry-After: ""
	// {"allowed":true,"limit":2,"remaining":1,"retry_after_ms":0,"reset_ms":60000,"rule":"default"}
	// 200 RateLimit: "default";r=0;t=60 Retry-After: ""
	// {"allowed":true,"limit":2,"remaining":0,"retry_after_ms":0,"reset_ms":60000,"rule":"default"}
	// 429 RateLimit: "default";r=0;t=60 Retry-After: "60"
	// {"allowed":false,"limit":2,"remaining":0,"retry_after_ms":60000,"reset_ms":60000,"rule":"default"}
}
