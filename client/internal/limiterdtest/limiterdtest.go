// Package limiterdtest gives the tests and examples of the client packages
// real limiterd nodes in-process (internal/nodetest's: the daemon's own
// limiter, Decider and httpapi handler over a rule file given as text),
// with clocks they control, so that the clients are tested against what
// the daemon really answers rather than against a reading of its
// documentation. Clock is safe for concurrent use.
package limiterdtest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/nodetest"
)

// T0 is the instant a FixedClock stands at.
func T0() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }

// FixedClock returns a clock standing at T0: every check happens at the
// same instant, so that what a limiter answers is reproducible.
func FixedClock() func() time.Time { return T0 }

// Clock is a clock that moves only when told to, starting at T0. It is
// safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at T0.
func NewClock() *Clock { return &Clock{t: T0()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Decider returns a Decider over a fresh limiter with the rules of the
// YAML rule file rules, deciding at now, with its metrics on a registry of
// its own.
func Decider(rules string, now func() time.Time) (*decision.Decider, error) {
	return DeciderFor(rules, now, prometheus.NewRegistry())
}

// DeciderFor is Decider with its metrics on reg.
func DeciderFor(rules string, now func() time.Time, reg *prometheus.Registry) (*decision.Decider, error) {
	return nodetest.Decider(rules, now, reg)
}

// OnChecker returns a Decider over ch (which may fail on purpose).
func OnChecker(ch decision.Checker, now func() time.Time, reg *prometheus.Registry) (*decision.Decider, error) {
	return nodetest.DeciderOn(ch, now, reg)
}

// Handler returns limiterd's HTTP API over dec, as the daemon serves it.
func Handler(dec *decision.Decider) (http.Handler, error) {
	return nodetest.Handler(dec, prometheus.NewRegistry())
}

// Server starts a limiterd node with the given rules and clock on
// 127.0.0.1, on a port the system picks. Close it when done.
func Server(rules string, now func() time.Time) (*httptest.Server, error) {
	return nodetest.Server(rules, now)
}
