package seedplot

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/seedstudy"
	"github.com/limiterd/limiterd/internal/svgchart"
	"github.com/limiterd/limiterd/internal/svgchart/svgtest"
)

// quickPlotPlan has every chart of limitsim seed --plot with a small
// client-rate sweep.
func quickPlotPlan() Plan {
	p := DefaultPlan()
	p.ClientRates = []float64{10, 300}
	p.ClientDurationMs = seedstudy.WindowMs
	return p
}

// shortPlotPlan is quickPlotPlan with two sync intervals at 10/s and one
// client rate over 20 s, small enough for the race detector.
func shortPlotPlan() Plan {
	p := quickPlotPlan()
	p.SyncIntervals, p.SyncRate = []float64{0.2, 5}, 10
	p.ClientRates, p.ClientDurationMs = []float64{10}, 20_000
	return p
}

// buildPlots builds p's charts, by name.
func buildPlots(t *testing.T, p Plan) map[string]File {
	t.Helper()
	files, err := Build(p)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]File)
	for _, f := range files {
		if _, dup := m[f.Name]; dup {
			t.Fatalf("two charts named %s", f.Name)
		}
		m[f.Name] = f
	}
	return m
}

// TestSlidingEnvelopeExact checks the envelope against a brute-force count
// of (t-window, t] at every ms, on random accepted instants.
func TestSlidingEnvelopeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 50 {
		window := 1 + rng.Int64N(300)
		bucket := 1 + rng.Int64N(40)
		duration := 1 + rng.Int64N(1000)
		var acc []int64
		for range rng.IntN(200) {
			acc = append(acc, rng.Int64N(duration))
		}
		slices.Sort(acc)
		got := slidingEnvelope(acc, window, bucket, duration)
		if want := int((duration + bucket - 1) / bucket); len(got) != want {
			t.Fatalf("%d points, want %d", len(got), want)
		}
		for k, p := range got {
			most := 0
			for tm := int64(k) * bucket; tm < min(int64(k+1)*bucket, duration); tm++ {
				n := 0
				for _, a := range acc {
					if a > tm-window && a <= tm {
						n++
					}
				}
				most = max(most, n)
			}
			if p.X != float64(int64(k)*bucket)/1000 || p.Y != float64(most) {
				t.Fatalf("window %d, bucket %d: point %d is %v, want (%g, %d)", window, bucket, k, p, float64(int64(k)*bucket)/1000, most)
			}
		}
	}
}

// TestWindowChartsMatchTable checks that each window chart shows what the
// seed table prints: its highest point per algorithm is that row's
// "max 60 s", and its legend says so.
func TestWindowChartsMatchTable(t *testing.T) {
	files, err := windowCharts(DefaultPlan().BucketMs)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := seedstudy.Table()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(blocks) {
		t.Fatalf("%d window charts for %d patterns", len(files), len(blocks))
	}
	for i, b := range blocks {
		c := files[i].Chart
		for _, r := range b.Rows {
			var s *svgchart.Series
			for j := range c.Series {
				if strings.HasPrefix(c.Series[j].Name, r.Algorithm+":") {
					s = &c.Series[j]
				}
			}
			if s == nil {
				t.Errorf("%s: no series for %s", files[i].Name, r.Algorithm)
				continue
			}
			top := 0.0
			for _, p := range s.Points {
				top = max(top, p.Y)
			}
			if int(top) != r.Max60 {
				t.Errorf("%s, %s: highest point %g, the table has max 60 s %d", files[i].Name, r.Algorithm, top, r.Max60)
			}
			if want := r.Algorithm + ": max " + strconv.Itoa(r.Max60) + " "; !strings.HasPrefix(s.Name, want) {
				t.Errorf("%s: legend %q, want it to start %q", files[i].Name, s.Name, want)
			}
			if top > c.Y.Max {
				t.Errorf("%s, %s: highest point %g above the axis (%g)", files[i].Name, r.Algorithm, top, c.Y.Max)
			}
		}
	}
}

// TestPlotsShort is TestPlots (plot_full_test.go) on the short plan, with
// the window chart alone compared byte for byte, which the race detector
// runs too.
func TestPlotsShort(t *testing.T) {
	checkPlots(t, shortPlotPlan(), []string{"window-slice-end.svg"})
}

// checkPlots builds p's charts once (the cluster charts are slow under
// the race detector) and checks them in subtests, goldens byte for byte.
func checkPlots(t *testing.T, p Plan, goldens []string) {
	plots := buildPlots(t, p)
	t.Run("structure", func(t *testing.T) { checkPlotsStructure(t, plots) })
	// The bytes must not depend on scheduling (the client-rate runs are
	// parallel) or map order.
	t.Run("deterministic", func(t *testing.T) {
		again := buildPlots(t, p)
		for name, f := range plots {
			if !bytes.Equal(f.Chart.SVG(), again[name].Chart.SVG()) {
				t.Errorf("%s differs between two builds", name)
			}
		}
	})
	t.Run("golden", func(t *testing.T) {
		for _, name := range goldens {
			checkGolden(t, name, plots[name].Chart.SVG())
		}
	})
	t.Run("write", func(t *testing.T) {
		var files []File
		for _, f := range plots {
			files = append(files, f)
		}
		dir := filepath.Join(t.TempDir(), "a", "b")
		if err := Write(dir, files); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := []string{"cluster-client-rate.svg", "cluster-sync-interval.svg", "window-edge-burst.svg",
			"window-intermittent.svg", "window-slice-end.svg", "window-steady-2x.svg"}
		if !slices.Equal(names, want) {
			t.Errorf("wrote %q, want %q", names, want)
		}
		// A file where the directory should be is an error.
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := Write(file, files); err == nil {
			t.Error("plotting into a regular file succeeded")
		}
	})
}

// checkPlotsStructure parses every chart and checks what a reader relies
// on: well-formed SVG with a viewBox, a title, one polyline per series, and
// the limit and the NFR1 ceiling drawn as reference lines.
func checkPlotsStructure(t *testing.T, plots map[string]File) {
	tests := []struct {
		name   string
		series int
		hlines []string // data-value of each reference line drawn
	}{
		{"window-steady-2x.svg", 4, []string{"600", "660"}},
		{"window-edge-burst.svg", 4, []string{"600", "660"}},
		{"window-intermittent.svg", 4, []string{"600", "660"}},
		{"window-slice-end.svg", 4, []string{"600", "660"}},
		{"cluster-sync-interval.svg", 3, []string{"1", "1.1"}},
		{"cluster-client-rate.svg", 2, []string{"1", "1.1", "1.066667"}},
	}
	if len(plots) != len(tests) {
		t.Errorf("%d charts, want %d", len(plots), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := plots[tt.name]
			if !ok {
				t.Fatal("chart missing")
			}
			els := svgtest.Parse(t, f.Chart.SVG())
			if got := svgtest.Find(els, "title", "id", "title"); len(got) != 1 || got[0].Text == "" {
				t.Error("no title")
			}
			if got := svgtest.Find(els, "polyline", "", ""); len(got) != tt.series {
				t.Errorf("%d polylines, want %d", len(got), tt.series)
			}
			var drawn []string
			for _, e := range svgtest.Find(els, "line", "class", "hline") {
				drawn = append(drawn, e.Attrs["data-value"])
			}
			if !slices.Equal(drawn, tt.hlines) {
				t.Errorf("reference lines %q, want %q", drawn, tt.hlines)
			}
			text := ""
			for _, e := range els {
				if e.Name == "text" {
					text += e.Text + "\n"
				}
			}
			for _, want := range []string{"limit: ", "NFR1 ceiling, 1.1 × limit: "} {
				if !strings.Contains(text, want) {
					t.Errorf("no %q in the text", want)
				}
			}
		})
	}
}
