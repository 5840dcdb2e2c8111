package httpapi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// reason is the reason label of limiterd_bad_requests_total: a fixed set, so
// nothing a client sends can grow the label space.
type reason uint8

const (
	reasonMissingKey reason = iota
	reasonInvalidKey
	reasonInvalidHits
	reasonUnknownRule
	reasonInvalidQuery
	reasonMalformedJSON
	reasonUnknownField
	reasonBodyTooLarge
	reasonUnsupportedMediaType
	reasonMethodNotAllowed
	reasonNotFound
	reasonInvalidLimit
	numReasons
)

func (r reason) String() string {
	switch r {
	case reasonMissingKey:
		return "missing_key"
	case reasonInvalidKey:
		return "invalid_key"
	case reasonInvalidHits:
		return "invalid_hits"
	case reasonUnknownRule:
		return "unknown_rule"
	case reasonInvalidQuery:
		return "invalid_query"
	case reasonMalformedJSON:
		return "malformed_json"
	case reasonUnknownField:
		return "unknown_field"
	case reasonBodyTooLarge:
		return "body_too_large"
	case reasonUnsupportedMediaType:
		return "unsupported_media_type"
	case reasonMethodNotAllowed:
		return "method_not_allowed"
	case reasonNotFound:
		return "not_found"
	case reasonInvalidLimit:
		return "invalid_limit"
	}
	return "unknown"
}

// metrics are httpapi's own, about HTTP: the decision metrics are the
// Decider's (package decision).
type metrics struct {
	badVec *prometheus.CounterVec
	badBy  [numReasons]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		badVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_bad_requests_total",
			Help: "Requests rejected as bad input (4xx) before anything was counted, by reason.",
		}, []string{"reason"}),
	}
	if err := reg.Register(m.badVec); err != nil {
		return nil, fmt.Errorf("httpapi: registering metrics: %w", err)
	}
	// Every reason is exported from the start, at 0, so that rate() works
	// before the first bad request.
	for i := range m.badBy {
		m.badBy[i] = m.badVec.WithLabelValues(reason(i).String())
	}
	return m, nil
}

func (m *metrics) bad(r reason) { m.badBy[r].Inc() }
