package client

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/limiterd/limiterd/client/internal/limiterdtest"
)

// rules5 is the rule file of most tests: 5 requests a minute for everyone.
const rules5 = `
rules:
  - name: default
    limit: 5
    window: 60s
`

// daemon starts a real limiterd node with rules and a fixed clock.
func daemon(t *testing.T, rules string) *httptest.Server {
	t.Helper()
	srv, err := limiterdtest.Server(rules, limiterdtest.FixedClock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// deadAddr returns a 127.0.0.1 address nothing listens on: a port the
// system gave out and that was closed again.
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

// stub is a node that answers what its fields say and counts what it is
// asked. It is safe for concurrent use.
type stub struct {
	srv  *httptest.Server
	hits atomic.Int64

	mu     sync.Mutex
	status int
	header http.Header
	body   string
	last   *http.Request // the last request, for its URL
}

// newStub starts a stub answering 200 with an allowed decision of rule
// name, so that tests can tell which node answered.
func newStub(t *testing.T, name string) *stub {
	t.Helper()
	s := &stub{status: http.StatusOK, body: `{"allowed":true,"limit":5,"remaining":4,"retry_after_ms":0,"reset_ms":60000,"rule":"` + name + `"}`}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, header, body := s.status, s.header, s.body
		s.last = r
		s.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// answer sets what the stub answers from now on.
func (s *stub) answer(status int, header http.Header, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.header, s.body = status, header, body
}

func (s *stub) lastURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return ""
	}
	return s.last.URL.String()
}

// slowNode starts a node that answers nothing until the test ends or the
// client gives up, whichever is first.
func slowNode(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	// Cleanups run last-in first-out: release the handlers, then close.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

// newClock returns a clock for the back-off that moves only when told to.
func newClock() *limiterdtest.Clock { return limiterdtest.NewClock() }

// newClient builds a client of addrs with cfg's other fields.
func newClient(t *testing.T, cfg Config, addrs ...string) *Client {
	t.Helper()
	cfg.Addrs = addrs
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// keyFirstAt returns a key that c asks node i about first. Keys hash over
// the nodes, so among 1000 candidates there is one for each of a few nodes.
func keyFirstAt(t *testing.T, c *Client, i int) string {
	t.Helper()
	for n := range 1000 {
		k := "client-" + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + string(rune('a'+n/676))
		if c.first(k) == i {
			return k
		}
	}
	t.Fatalf("no key of 1000 starts at node %d", i)
	return ""
}

// backingOff reports whether node i is in its back-off.
func backingOff(c *Client, i int) bool { return c.nodes[i].until.Load() != 0 }
