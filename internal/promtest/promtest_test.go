package promtest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"k"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	reg.MustRegister(c, h)
	c.WithLabelValues("a").Add(3)
	c.WithLabelValues("b").Inc()
	h.Observe(1)
	h.Observe(2)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"c_total", map[string]string{"k": "a"}, 3, true},
		{"c_total", map[string]string{"k": "z"}, 0, false},
		{"c_total", nil, 0, false},
		{"h_seconds", nil, 2, true},
	} {
		v, ok, err := Series(reg, tc.name, tc.labels)
		if err != nil || v != tc.want || ok != tc.ok {
			t.Errorf("%s%v: %v %v %v, want %v %v", tc.name, tc.labels, v, ok, err, tc.want, tc.ok)
		}
	}
	vals, err := LabelValues(reg, "c_total", "k")
	if err != nil || len(vals) != 2 || !vals["a"] || !vals["b"] {
		t.Fatalf("label values %v %v", vals, err)
	}
}

// registryAndText is a registry with a counter vector, a gauge and a
// histogram, and its /metrics text.
func registryAndText(t *testing.T) (*prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "checks_total", Help: "h"}, []string{"result", "rule"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "members", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lag_seconds", Help: "h", Buckets: []float64{0.005, 0.5}})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("granted", "a").Add(3)
	c.WithLabelValues("fallback_timeout", "a").Add(2)
	c.WithLabelValues("fallback_unavailable", "b").Add(5)
	g.Set(7)
	h.Observe(0.001)
	h.Observe(1)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reg, string(b)
}

// TestReadBothWays: a registry and its /metrics text read the same:
// values, sums, prefixes of label values, types and samples.
func TestReadBothWays(t *testing.T) {
	reg, text := registryAndText(t)
	gathered := MustGather(t, reg)
	parsed, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	scraped := MustScrape(t, srv.Client(), srv.URL)
	for name, m := range map[string]Metrics{"gathered": gathered, "parsed": parsed, "scraped": scraped} {
		for _, tc := range []struct {
			name   string
			labels []string
			value  float64
			ok     bool
			sum    float64
		}{
			{"checks_total", []string{"result", "granted"}, 3, true, 3},
			{"checks_total", []string{"result", "fallback*"}, 2, true, 7},
			{"checks_total", []string{"result", "fallback*", "rule", "b"}, 5, true, 5},
			{"checks_total", nil, 2, true, 10}, // the first series: fallback_timeout sorts first
			{"checks_total", []string{"result", "fallback"}, 0, false, 0},
			{"members", nil, 7, true, 7},
			{"lag_seconds", nil, 2, true, 2},
			{"absent", nil, 0, false, 0},
		} {
			v, ok := m.Value(tc.name, tc.labels...)
			if v != tc.value || ok != tc.ok {
				t.Errorf("%s: Value(%s, %q) = %v, %v; want %v, %v", name, tc.name, tc.labels, v, ok, tc.value, tc.ok)
			}
			if s := m.Sum(tc.name, tc.labels...); s != tc.sum {
				t.Errorf("%s: Sum(%s, %q) = %v, want %v", name, tc.name, tc.labels, s, tc.sum)
			}
		}
		types := m.Types()
		if types["checks_total"] != "counter" || types["members"] != "gauge" || types["lag_seconds"] != "histogram" || len(types) != 3 {
			t.Errorf("%s: types %v", name, types)
		}
		var lines []string
		for _, s := range m.Samples() {
			var ls []string
			for k, v := range s.Labels {
				ls = append(ls, k+"="+v)
			}
			sort.Strings(ls)
			lines = append(lines, fmt.Sprintf("%s{%s} %g", s.Name, strings.Join(ls, ","), s.Value))
		}
		want := []string{
			"checks_total{result=fallback_timeout,rule=a} 2", "checks_total{result=fallback_unavailable,rule=b} 5", "checks_total{result=granted,rule=a} 3",
			"lag_seconds_bucket{le=0.005} 1", "lag_seconds_bucket{le=0.5} 1", "lag_seconds_bucket{le=+Inf} 2", "lag_seconds_sum{} 1.001", "lag_seconds_count{} 2",
			"members{} 7",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: samples\n%s\nwant\n%s", name, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	}
	// Every sample line of the text is one of Samples, le and all.
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, "{")
		name, _, _ = strings.Cut(name, " ")
		found := false
		for _, s := range parsed.Samples() {
			le, bucket := s.Labels["le"]
			found = found || s.Name == name && (!bucket || strings.Contains(l, `{le="`+le+`"}`))
		}
		if !found {
			t.Errorf("text line %q has no sample", l)
		}
	}
	if _, err := Parse(strings.NewReader("not metrics {")); err == nil {
		t.Error("Parse took a malformed text")
	}
}
