package httpapi

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// outcome is the outcome label of limiterd_decisions_total.
type outcome uint8

const (
	outcomeAllowed outcome = iota
	outcomeDenied
	outcomeShadowDenied
	outcomeUntracked
	outcomeUnlimited // no rule governs the key
	outcomeError     // internal error, allowed (NFR3)
	numOutcomes
)

func (o outcome) String() string {
	switch o {
	case outcomeAllowed:
		return "allowed"
	case outcomeDenied:
		return "denied"
	case outcomeShadowDenied:
		return "shadow_denied"
	case outcomeUntracked:
		return "untracked"
	case outcomeUnlimited:
		return "unlimited"
	case outcomeError:
		return "error"
	}
	return "unknown"
}

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
	}
	return "unknown"
}

// ruleCounters holds the decision counters of one rule, one per outcome.
type ruleCounters [numOutcomes]prometheus.Counter

type metrics struct {
	decisions *prometheus.CounterVec
	duration  prometheus.Histogram
	errors    prometheus.Counter
	badVec    *prometheus.CounterVec
	badBy     [numReasons]prometheus.Counter

	// byRule caches the decision counters per rule name so that the hot path
	// does neither a label-hash lookup nor an allocation: readers load an
	// immutable map; a new rule name (after a reload) copies it under mu.
	// It grows only with rule names the limiter reports, i.e. configured ones.
	byRule atomic.Pointer[map[string]*ruleCounters]
	mu     sync.Mutex
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_decisions_total",
			Help: "Checks answered, by deciding rule (\"\" when none) and outcome.",
		}, []string{"rule", "outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "limiterd_check_duration_seconds",
			Help: "Time spent deciding one check (the limiter call, without HTTP parsing and writing).",
			// A check takes about a microsecond; the upper buckets catch lock
			// contention and GC pauses.
			Buckets: []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 2.5e-2},
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "limiterd_check_errors_total",
			Help: "Checks that failed inside the limiter (error or panic) and were allowed (NFR3).",
		}),
		badVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_bad_requests_total",
			Help: "Requests rejected as bad input (4xx) before anything was counted, by reason.",
		}, []string{"reason"}),
	}
	cs := []prometheus.Collector{m.decisions, m.duration, m.errors, m.badVec}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] { // leave reg as it was
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("httpapi: registering metrics: %w", err)
		}
	}
	for i := range m.badBy {
		m.badBy[i] = m.badVec.WithLabelValues(reason(i).String())
	}
	empty := map[string]*ruleCounters{}
	m.byRule.Store(&empty)
	m.forRule("") // export the no-rule series from the start
	return m, nil
}

// forRule returns the counters of a rule, creating them on first use.
func (m *metrics) forRule(rule string) *ruleCounters {
	if rc, ok := (*m.byRule.Load())[rule]; ok {
		return rc
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.byRule.Load()
	if rc, ok := old[rule]; ok {
		return rc
	}
	rc := new(ruleCounters)
	for o := range rc {
		rc[o] = m.decisions.WithLabelValues(rule, outcome(o).String())
	}
	next := make(map[string]*ruleCounters, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[rule] = rc
	m.byRule.Store(&next)
	return rc
}

func (m *metrics) decision(rule string, o outcome) { m.forRule(rule)[o].Inc() }

func (m *metrics) bad(r reason) { m.badBy[r].Inc() }
