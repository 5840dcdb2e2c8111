package rls

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the frontend's own: the decisions themselves are counted by
// the decision layer, under the same names as for /check.
type metrics struct {
	requests *prometheus.CounterVec
}

// results are the values of the result label, registered at 0.
func results() []string { return []string{"ok", "over_limit", "invalid", "error"} }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "limiterd_grpc_requests_total",
		Help: "Envoy rate limit service calls (ShouldRateLimit) by result: ok, over_limit, invalid (refused as InvalidArgument, nothing counted), error (a panic in the frontend, answered OK).",
	}, []string{"result"})}
	for _, r := range results() {
		m.requests.WithLabelValues(r)
	}
	if err := reg.Register(m.requests); err != nil {
		return nil, fmt.Errorf("rls: register metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) result(r string) { m.requests.WithLabelValues(r).Inc() }
