package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/limiterd/limiterd/client/middleware"
)

// discard is a ResponseWriter that keeps only the status, so that the
// benchmark measures the handlers rather than a recorder's buffers.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// BenchmarkMiddleware is the cost of limiting a request: a bare handler,
// the middleware over the in-process limiter (local), and the middleware
// over the HTTP client asking a limiterd node in this process over loopback
// (daemon). The limit is out of reach, so every request is allowed and gets
// its RateLimit fields; 1024 client addresses take turns, so after the
// first round each check is of a key the counter tracks, as in a service.
func BenchmarkMiddleware(b *testing.B) {
	const rules = `
rules:
  - name: default
    limit: 2000000000
    window: 60s
`
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, "/items/1", nil)
		r.RemoteAddr = "10." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ".1:40000"
		reqs[i] = r
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	var failures atomic.Int64 // fail-opens would make the daemon case look cheap
	opts := middleware.Options{OnError: func(*http.Request, error) { failures.Add(1) }}
	cases := []struct {
		name string
		h    http.Handler
	}{
		{"bare", next},
		{"local", middleware.New(newLocal(b, rules), opts)(next)},
		{"daemon", middleware.New(newDaemonClient(b, rules), opts)(next)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			w := &discard{h: make(http.Header)}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				clear(w.h)
				w.code = 0
				c.h.ServeHTTP(w, reqs[i%len(reqs)])
				i++
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
			}
			if c.name != "bare" && w.h.Get("RateLimit") == "" {
				b.Fatal("no RateLimit field: the limiter did not decide")
			}
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d checks failed open", n)
			}
		})
	}
}
