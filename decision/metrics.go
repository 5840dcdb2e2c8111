package decision

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ruleCounters holds the decision counters of one rule, one per outcome.
type ruleCounters [numOutcomes]prometheus.Counter

type metrics struct {
	decisions *prometheus.CounterVec
	duration  prometheus.Histogram
	errors    prometheus.Counter

	// The slow path of a coordinated cluster.
	coordinatedVec *prometheus.CounterVec
	coordinated    [numCoord]prometheus.Counter
	roundTrip      prometheus.Histogram

	// byRule caches the decision counters per rule name so that the hot path
	// does neither a label-hash lookup nor an allocation: readers load an
	// immutable map; a new rule name (after a reload) copies it under mu.
	// It grows only with rule names the Checker reports for a decision,
	// i.e. configured ones.
	byRule atomic.Pointer[map[string]*ruleCounters]
	mu     sync.Mutex
}

// newMetrics registers the decision metrics on reg, with the names and help
// httpapi used before this package existed: dashboards depend on them.
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
	}
	m.coordinatedVec = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "limiterd_coordinated_checks_total",
		Help: "Checks at the margin put to the key's coordinator, by result: granted, denied, or decided alone with the budget because no answer came in time (fallback_timeout) or none could come (fallback_unavailable).",
	}, []string{"result"})
	for i := range m.coordinated {
		m.coordinated[i] = m.coordinatedVec.WithLabelValues(coordResult(i))
	}
	m.roundTrip = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "limiterd_coordinator_wait_seconds",
		Help: "Time a check at the margin waited for the key's coordinator (the round trip, or the deadline).",
		// Loopback round trips take tens of microseconds, a LAN's a few
		// hundred; the deadline is a few milliseconds.
		Buckets: []float64{2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1},
	})
	cs := m.collectors()
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] { // leave reg as it was
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("decision: registering metrics: %w", err)
		}
	}
	empty := map[string]*ruleCounters{}
	m.byRule.Store(&empty)
	m.forRule("") // export the no-rule series from the start
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.duration, m.errors, m.coordinatedVec, m.roundTrip}
}

// unregister takes the metrics off reg again (a New that failed after
// registering them).
func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
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
		rc[o] = m.decisions.WithLabelValues(rule, Outcome(o).String())
	}
	next := make(map[string]*ruleCounters, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[rule] = rc
	m.byRule.Store(&next)
	return rc
}

func (m *metrics) decision(rule string, o Outcome) { m.forRule(rule)[o].Inc() }
