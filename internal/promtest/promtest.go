// Package promtest reads metrics back from a Prometheus registry, for the
// tests of the packages that register them. It is a test helper only:
// nothing in a production path imports it. Safe for concurrent use as the
// registry is.
package promtest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Series returns the value of the counter or gauge, or the sample count of
// the histogram, name{labels} in g, and whether that series exists. labels
// must name every label of the series.
func Series(g prometheus.Gatherer, name string, labels map[string]string) (float64, bool, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, false, fmt.Errorf("promtest: gather: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true, nil
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true, nil
			}
			return m.GetCounter().GetValue(), true, nil
		}
	}
	return 0, false, nil
}

// LabelValues returns the values the label takes over the series of name.
func LabelValues(g prometheus.Gatherer, name, label string) (map[string]bool, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("promtest: gather: %w", err)
	}
	vals := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					vals[lp.GetValue()] = true
				}
			}
		}
	}
	return vals, nil
}
