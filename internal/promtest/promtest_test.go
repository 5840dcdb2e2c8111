package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
