package middleware_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/internal/limiterdtest"
	"github.com/limiterd/limiterd/client/local"
	"github.com/limiterd/limiterd/client/middleware"
)

// rules5 allows 5 requests a minute to every key.
const rules5 = `
rules:
  - name: default
    limit: 5
    window: 60s
`

// backend is a Checker under test, by name.
type backend struct {
	name string
	new  func(t testing.TB, rules string) middleware.Checker
}

// backends are both Checkers: each call builds a fresh limiter.
func backends() []backend {
	return []backend{
		{"local", newLocal},
		{"daemon", newDaemonClient},
	}
}

// newLocal returns an in-process Checker over rules, at a fixed instant.
func newLocal(t testing.TB, rules string) middleware.Checker {
	t.Helper()
	dec, err := limiterdtest.Decider(rules, limiterdtest.FixedClock())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		t.Fatal(err)
	}
	return lc
}

// newDaemonClient starts a limiterd node over rules, at a fixed instant,
// and returns a client of it. The timeouts are generous: the node is
// healthy, and a loaded test machine must not make it fail open.
func newDaemonClient(t testing.TB, rules string) middleware.Checker {
	t.Helper()
	srv, err := limiterdtest.Server(rules, limiterdtest.FixedClock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return newClient(t, client.Config{Addrs: []string{srv.URL}})
}

func newClient(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	cfg.Timeout, cfg.AttemptTimeout = 5*time.Second, 5*time.Second
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// deadAddr returns a 127.0.0.1 address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// app is the handler behind the middleware: it counts the requests that
// reach it.
type app struct{ calls atomic.Int64 }

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	_, _ = w.Write([]byte("hello\n"))
}

// errLog collects what OnError is told.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) onError(_ *http.Request, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// get serves one GET of path from remote (an ip:port) through h.
func get(h http.Handler, path, remote string, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}
