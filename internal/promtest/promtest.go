// Package promtest reads metrics back for tests, one way whatever they
// come from: a Prometheus registry (Gather) or the text a /metrics
// endpoint serves (Parse, Scrape; a live limiterd process's). Both give
// Metrics, whose series are selected by name and by label pairs the same
// way. It is a test helper only: nothing in a production path imports it.
// Metrics is read-only once made, and safe for concurrent use; so are the
// functions, as the registry is.
package promtest

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a set of metric families read at one instant.
type Metrics struct {
	fams map[string]*dto.MetricFamily
}

// Gather reads g's metrics.
func Gather(g prometheus.Gatherer) (Metrics, error) {
	mfs, err := g.Gather()
	if err != nil {
		return Metrics{}, fmt.Errorf("promtest: gather: %w", err)
	}
	m := Metrics{fams: make(map[string]*dto.MetricFamily, len(mfs))}
	for _, mf := range mfs {
		m.fams[mf.GetName()] = mf
	}
	return m, nil
}

// Parse reads metrics in the Prometheus text format, as /metrics serves them.
func Parse(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Metrics{}, fmt.Errorf("promtest: parse: %w", err)
	}
	return Metrics{fams: fams}, nil
}

// Scrape GETs url (a /metrics endpoint) with hc and parses the answer.
func Scrape(hc *http.Client, url string) (Metrics, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return Metrics{}, fmt.Errorf("promtest: scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("promtest: scrape %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// MustGather is Gather failing t on an error.
func MustGather(t testing.TB, g prometheus.Gatherer) Metrics {
	t.Helper()
	m, err := Gather(g)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MustScrape is Scrape failing t on an error.
func MustScrape(t testing.TB, hc *http.Client, url string) Metrics {
	t.Helper()
	m, err := Scrape(hc, url)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Value returns the value of the first series of name whose labels
// include every pair of labels (name, value, name, value...), and whether
// there is one. A value ending in "*" matches every value that starts
// with the rest ("fallback*": fallback_timeout, fallback_unavailable). A
// histogram's or a summary's value is its sample count.
func (m Metrics) Value(name string, labels ...string) (float64, bool) {
	for _, s := range m.fams[name].GetMetric() {
		if matches(s, labels) {
			return value(s), true
		}
	}
	return 0, false
}

// Sum sums the values (as Value reads them) of every series of name whose
// labels include the pairs of labels; 0 when there is none.
func (m Metrics) Sum(name string, labels ...string) float64 {
	var sum float64
	for _, s := range m.fams[name].GetMetric() {
		if matches(s, labels) {
			sum += value(s)
		}
	}
	return sum
}

// Types returns each family's type by its name: "counter", "gauge",
// "histogram", "summary" or "untyped", as a # TYPE line writes it.
func (m Metrics) Types() map[string]string {
	types := make(map[string]string, len(m.fams))
	for name, mf := range m.fams {
		types[name] = strings.ToLower(mf.GetType().String())
	}
	return types
}

// A Sample is one line of the text format: a series name (a histogram's
// name_bucket, name_sum and name_count, with le on the buckets; a
// summary's quantiles, with quantile, then name_sum and name_count), its
// labels and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples returns every sample as /metrics would write it, by name and
// then in the families' order.
func (m Metrics) Samples() []Sample {
	names := make([]string, 0, len(m.fams))
	for n := range m.fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Sample
	for _, n := range names {
		for _, s := range m.fams[n].GetMetric() {
			out = append(out, samplesOf(n, s)...)
		}
	}
	return out
}

func samplesOf(name string, s *dto.Metric) []Sample {
	labels := func(extra ...string) map[string]string {
		l := make(map[string]string, len(s.GetLabel())+1)
		for _, lp := range s.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if len(extra) == 2 {
			l[extra[0]] = extra[1]
		}
		return l
	}
	switch {
	case s.GetHistogram() != nil:
		h := s.GetHistogram()
		var out []Sample
		inf := false
		for _, b := range h.GetBucket() {
			inf = inf || math.IsInf(b.GetUpperBound(), +1)
			out = append(out, Sample{name + "_bucket", labels("le", formatFloat(b.GetUpperBound())), float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat()})
		}
		count := float64(h.GetSampleCount()) + h.GetSampleCountFloat()
		if !inf {
			out = append(out, Sample{name + "_bucket", labels("le", "+Inf"), count})
		}
		return append(out, Sample{name + "_sum", labels(), h.GetSampleSum()}, Sample{name + "_count", labels(), count})
	case s.GetSummary() != nil:
		sm := s.GetSummary()
		var out []Sample
		for _, q := range sm.GetQuantile() {
			out = append(out, Sample{name, labels("quantile", formatFloat(q.GetQuantile())), q.GetValue()})
		}
		return append(out, Sample{name + "_sum", labels(), sm.GetSampleSum()}, Sample{name + "_count", labels(), float64(sm.GetSampleCount())})
	default:
		return []Sample{{name, labels(), value(s)}}
	}
}

// formatFloat writes a le or quantile value as the text format does.
func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// matches reports whether s has every pair of labels (see Value).
func matches(s *dto.Metric, labels []string) bool {
next:
	for i := 0; i+1 < len(labels); i += 2 {
		want, prefix := labels[i+1], false
		if w, ok := strings.CutSuffix(want, "*"); ok {
			want, prefix = w, true
		}
		for _, lp := range s.GetLabel() {
			if lp.GetName() == labels[i] && (lp.GetValue() == want || prefix && strings.HasPrefix(lp.GetValue(), want)) {
				continue next
			}
		}
		return false
	}
	return true
}

// value is a series' value: a counter's, a gauge's, an untyped one's, or
// a histogram's or a summary's sample count.
func value(s *dto.Metric) float64 {
	switch {
	case s.GetHistogram() != nil:
		return float64(s.GetHistogram().GetSampleCount()) + s.GetHistogram().GetSampleCountFloat()
	case s.GetSummary() != nil:
		return float64(s.GetSummary().GetSampleCount())
	case s.GetGauge() != nil:
		return s.GetGauge().GetValue()
	case s.GetUntyped() != nil:
		return s.GetUntyped().GetValue()
	}
	return s.GetCounter().GetValue()
}

// Series returns the value of the counter or gauge, or the sample count of
// the histogram, name{labels} in g, and whether that series exists. labels
// must name every label of the series.
func Series(g prometheus.Gatherer, name string, labels map[string]string) (float64, bool, error) {
	m, err := Gather(g)
	if err != nil {
		return 0, false, err
	}
	for _, s := range m.fams[name].GetMetric() {
		if len(s.GetLabel()) != len(labels) {
			continue
		}
		if matchesExact(s, labels) {
			return value(s), true, nil
		}
	}
	return 0, false, nil
}

// matchesExact reports whether s's labels are exactly labels.
func matchesExact(s *dto.Metric, labels map[string]string) bool {
	for _, lp := range s.GetLabel() {
		if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
			return false
		}
	}
	return true
}

// LabelValues returns the values the label takes over the series of name.
func LabelValues(g prometheus.Gatherer, name, label string) (map[string]bool, error) {
	m, err := Gather(g)
	if err != nil {
		return nil, err
	}
	vals := map[string]bool{}
	for _, s := range m.fams[name].GetMetric() {
		for _, lp := range s.GetLabel() {
			if lp.GetName() == label {
				vals[lp.GetValue()] = true
			}
		}
	}
	return vals, nil
}
