package nodetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
	"github.com/limiterd/limiterd/limiter"
)

// An in-process node is the daemon's own stack without the daemon: a
// fresh counter and limiter over a rule file given as text, the Decider,
// and the httpapi handler, deciding at a clock the test gives. It answers
// what limiterd answers, reproducibly, and alone: no cluster, no files.

// Decider returns a Decider over a fresh limiter with the rules of the
// YAML rule file rules, deciding at now, with its metrics on reg.
func Decider(rules string, now func() time.Time, reg prometheus.Registerer) (*decision.Decider, error) {
	rs, err := limiter.Parse("rules.yaml", []byte(rules))
	if err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	lim, err := limiter.New(c, rs)
	if err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	return DeciderOn(lim, now, reg)
}

// DeciderOn returns a Decider over ch (which may fail on purpose),
// deciding at now, with its metrics on reg.
func DeciderOn(ch decision.Checker, now func() time.Time, reg prometheus.Registerer) (*decision.Decider, error) {
	cfg := decision.DefaultConfig()
	cfg.Now = now
	dec, err := decision.New(cfg, ch, reg, nil)
	if err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	return dec, nil
}

// Handler returns limiterd's HTTP API over dec, as the daemon serves it,
// with its metrics on reg.
func Handler(dec *decision.Decider, reg *prometheus.Registry) (http.Handler, error) {
	api, err := httpapi.New(httpapi.DefaultConfig(), dec, reg, nil)
	if err != nil {
		return nil, fmt.Errorf("nodetest: %w", err)
	}
	return api, nil
}

// Server starts an in-process node with the given rules and clock
// (time.Now for the real one) on 127.0.0.1, on a port the system picks,
// its metrics on a registry of its own. Close it when done.
func Server(rules string, now func() time.Time) (*httptest.Server, error) {
	reg := prometheus.NewRegistry()
	dec, err := Decider(rules, now, reg)
	if err != nil {
		return nil, err
	}
	h, err := Handler(dec, reg)
	if err != nil {
		return nil, err
	}
	return httptest.NewServer(h), nil
}

// Serve is Server with the real clock for t: it fails t if the node
// cannot start, and closes it when t ends.
func Serve(t testing.TB, rules string) *httptest.Server {
	t.Helper()
	srv, err := Server(rules, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
