package middleware_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/internal/limiterdtest"
	"github.com/limiterd/limiterd/client/local"
	"github.com/limiterd/limiterd/client/middleware"
)

const rules2 = `
rules:
  - name: default
    limit: 2
    window: 60s
`

// Example limits a handler in-process, with no daemon, to 2 requests a
// minute per client address: the third request of the client gets the 429.
// (limiterdtest builds the Decider as package local's example does.)
func Example() {
	dec, err := limiterdtest.Decider(rules2, limiterdtest.FixedClock())
	if err != nil {
		panic(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		panic(err)
	}
	limit := middleware.New(lc, middleware.Options{KeyFunc: middleware.ClientIP()})
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.7:40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q %s", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"), w.Body)
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=60 Retry-After: "" hello
	// 200 RateLimit: "default";r=0;t=60 Retry-After: "" hello
	// 429 RateLimit: "default";r=0;t=60 Retry-After: "60" {"error":"too many requests","retry_after_ms":60000}
}

// Example_daemon limits a service behind a reverse proxy on 10.0.0.0/8 with
// a limiterd node (a real one, in-process here): the same middleware, the
// Checker swapped for a client. The client's address comes from
// X-Forwarded-For, believed because the peer is the trusted proxy; what the
// client prepended to it is ignored.
func Example_daemon() {
	srv, err := limiterdtest.Server(rules2, limiterdtest.FixedClock())
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	c, err := client.New(client.Config{
		Addrs: []string{srv.URL},
		// Generous, so that the example cannot fail open on a busy test
		// machine; the defaults (50ms, 20ms) suit a service.
		Timeout: time.Second, AttemptTimeout: time.Second,
	})
	if err != nil {
		panic(err)
	}
	limit := middleware.New(c, middleware.Options{
		KeyFunc: middleware.ClientIP(netip.MustParsePrefix("10.0.0.0/8")),
		OnError: func(r *http.Request, err error) { fmt.Println("limiter:", err) },
	})
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for _, xff := range []string{"198.51.100.1", "192.0.2.1, 198.51.100.1", "192.0.2.2, 198.51.100.1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:40000" // the proxy
		r.Header.Set("X-Forwarded-For", xff)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s\n", w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 RateLimit: "default";r=1;t=60
	// 200 RateLimit: "default";r=0;t=60
	// 429 RateLimit: "default";r=0;t=60
}
