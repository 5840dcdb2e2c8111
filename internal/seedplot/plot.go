package seedplot

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/limiterd/limiterd/internal/burst"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
	"github.com/limiterd/limiterd/internal/svgchart"
)

// Plan is what the charts run; tests use a smaller one for the cluster
// charts, which the race detector slows about 40-fold.
type Plan struct {
	// BucketMs is the resolution of the window charts: each point is the
	// most accepted in (t-60 s, t] over one bucket, so peaks are exact.
	BucketMs int64
	// SyncIntervals (seconds) and SyncRate (requests/s) are the sync-interval
	// chart: the seed's distributed model at that rate, one 60 s window.
	SyncIntervals []float64
	SyncRate      int
	// ClientRates (requests/s) over ClientDurationMs are the client-rate
	// chart, run by limitsim burst's code.
	ClientRates      []float64
	ClientDurationMs int64
}

// DefaultPlan is limitsim seed --plot: 250 ms per point (about a pixel
// of the window charts), the seed's four sync intervals with 0.5 s added,
// and limitsim burst's client rates and duration with a few rates added,
// so the charts agree with its NFR1 table where they share a rate.
func DefaultPlan() Plan {
	return Plan{
		BucketMs:         250,
		SyncIntervals:    []float64{0.2, 0.5, 1, 2, 5},
		SyncRate:         90,
		ClientRates:      []float64{10, 20, 50, 90, 200, 500, 1000, 2000, 5000, 10000},
		ClientDurationMs: 3 * seedstudy.WindowMs,
	}
}

// File is one chart and the file it goes to.
type File struct {
	Name  string // file name, e.g. "window-steady-2x.svg"
	Chart svgchart.Chart
}

// Colours: the Okabe-Ito palette, readable with every common colour-vision
// deficiency. limiterd is always blue.
const (
	colFixed    = "#E69F00" // orange
	colSliding  = "#CC79A7" // reddish purple
	colBucket   = "#009E73" // bluish green
	colLimiterd = "#0072B2" // blue
	colNoBudget = "#009E73"
	colSeed     = "#E69F00"
	colLimit    = "#555555"
	colNFR1     = "#D55E00" // vermillion
)

// Reference lines.
const (
	dashLimit = "8 5"
	dashNFR1  = "4 3"
	dashBound = "2 4"
)

// windowSlugs names the window charts, in the order of seedstudy.Patterns.
func windowSlugs() []string {
	return []string{"window-steady-2x.svg", "window-edge-burst.svg", "window-intermittent.svg", "window-slice-end.svg"}
}

// windowTitles are the charts' titles, in the order of seedstudy.Patterns.
func windowTitles() []string {
	return []string{
		"Steady at twice the limit (20/s)",
		"A full limit on both sides of a window edge",
		"Intermittent, exactly at the limit",
		"Crowded at a slice end (not in the seed)",
	}
}

// Build computes every chart of the plan, in a fixed order.
func Build(p Plan) ([]File, error) {
	files, err := windowCharts(p.BucketMs)
	if err != nil {
		return nil, err
	}
	sync, err := syncIntervalChart(p.SyncIntervals, p.SyncRate)
	if err != nil {
		return nil, err
	}
	rate, err := clientRateChart(p.ClientRates, p.ClientDurationMs)
	if err != nil {
		return nil, err
	}
	return append(files, sync, rate), nil
}

// Write writes each chart to dir/name, creating dir if needed.
func Write(dir string, files []File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Chart.SVG(), 0o644); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	return nil
}

// windowCharts draws, for each seed pattern, the accepted requests in the
// last 60 s against time for each algorithm of the seed table.
func windowCharts(bucketMs int64) ([]File, error) {
	pats, slugs, titles := seedstudy.Patterns(), windowSlugs(), windowTitles()
	if len(pats) != len(slugs) || len(pats) != len(titles) {
		return nil, errors.New("plot: a seed pattern has no chart name")
	}
	// limiterd is drawn first and wide: where another algorithm accepts the
	// same, its line runs inside limiterd's, which shows as a border.
	styles := map[string]svgchart.Series{
		"fixed window":            {Color: colFixed, Width: 2},
		"12-slice sliding":        {Color: colSliding, Width: 2, Dash: "7 4"},
		"token bucket (60, 10/s)": {Color: colBucket, Width: 2},
		"limiterd":                {Color: colLimiterd, Width: 5},
	}
	var files []File
	for i, pat := range pats {
		at := pat.At()
		c := svgchart.Chart{
			Title:    titles[i] + ": accepted requests in the last 60 s",
			Subtitle: fmt.Sprintf("One client, %d requests: %s. Limit %d per 60 s.", len(at), pat.Desc, seedstudy.Limit),
			X:        svgchart.Axis{Label: "time t (s)", Min: 0, Max: seedstudy.DurationMs / 1000},
		}
		for t := 0; t <= seedstudy.DurationMs/1000; t += 30 { // window edges every other tick
			c.X.Ticks = append(c.X.Ticks, svgchart.Tick{V: float64(t), Label: strconv.Itoa(t)})
		}
		top := int(seedstudy.Limit * seedstudy.NFR1Ratio)
		for _, a := range seedstudy.Algorithms() {
			m, err := a.Build()
			if err != nil {
				return nil, err
			}
			acc, err := seedstudy.RunModel(m, at)
			if err != nil {
				return nil, fmt.Errorf("plot: %s on %q: %w", a.Name, pat.Name, err)
			}
			s, ok := styles[a.Name]
			if !ok {
				return nil, fmt.Errorf("plot: no style for algorithm %q", a.Name)
			}
			most := clustersim.MaxInWindow(acc, seedstudy.WindowMs)
			top = max(top, most)
			s.Name = fmt.Sprintf("%s: max %d (%.2f×), %d rejected", a.Name, most, seedstudy.Ratio(most, seedstudy.Limit), len(at)-len(acc))
			s.Points = slidingEnvelope(acc, seedstudy.WindowMs, bucketMs, seedstudy.DurationMs)
			if a.Name == "limiterd" {
				c.Series = append([]svgchart.Series{s}, c.Series...)
			} else {
				c.Series = append(c.Series, s)
			}
		}
		c.Y = svgchart.Axis{Label: "accepted in (t − 60 s, t]", Min: 0, Max: float64(ceilTo(top*108/100, 100))}
		c.HLines = limitLines(seedstudy.Limit)
		files = append(files, File{slugs[i], c})
	}
	return files, nil
}

// limitLines are the limit and the NFR1 ceiling, in requests (scale 1) or
// as ratios of the limit (limit 1).
func limitLines(limit float64) []svgchart.HLine {
	unit := func(v float64) string {
		if limit == 1 {
			return fmt.Sprintf("%.1f", v)
		}
		return strconv.Itoa(int(v))
	}
	return []svgchart.HLine{
		{Y: limit, Label: "limit: " + unit(limit), Color: colLimit, Dash: dashLimit},
		{Y: limit * seedstudy.NFR1Ratio, Label: "NFR1 ceiling, 1.1 × limit: " + unit(limit*seedstudy.NFR1Ratio), Color: colNFR1, Dash: dashNFR1},
	}
}

// slidingEnvelope returns, for each bucket [k*bucket, (k+1)*bucket) of
// [0, duration), the largest number of accepted instants (ms,
// non-decreasing) in (t-window, t] for any whole ms t in the bucket, as the
// point (k*bucket in seconds, that number). Taking the maximum rather than
// a sample keeps every peak: the chart's highest point is maxInWindow.
func slidingEnvelope(acc []int64, window, bucket, duration int64) []svgchart.Point {
	pts := make([]svgchart.Point, 0, duration/bucket+1)
	lo, hi := 0, 0 // acc[lo:hi] are the instants in (t-window, t]
	for start := int64(0); start < duration; start += bucket {
		most := 0
		for t := start; t < min(start+bucket, duration); t++ {
			for hi < len(acc) && acc[hi] <= t {
				hi++
			}
			for lo < hi && acc[lo] <= t-window {
				lo++
			}
			most = max(most, hi-lo)
		}
		pts = append(pts, svgchart.Point{X: float64(start) / 1000, Y: float64(most)})
	}
	return pts
}

// ceilTo rounds n up to a multiple of step.
func ceilTo(n, step int) int { return (n + step - 1) / step * step }

// syncIntervalChart draws the seed's delayed-sync table as a chart: the most
// accepted in the window over the limit against the sync interval, for the
// seed's model and for limiterd's simulated cluster with and without the
// budget. Every request lies in one 60 s window, so the most accepted in any
// 60 s interval is the number accepted.
func syncIntervalChart(intervals []float64, rate int) (File, error) {
	seedLine := svgchart.Series{Name: "seed's model: delayed sync", Color: colSeed, Width: 2, Dash: "7 4", Markers: true}
	budget := svgchart.Series{Name: "limiterd, per-node budget (default)", Color: colLimiterd, Width: 2.5, Markers: true}
	none := svgchart.Series{Name: "limiterd, no budget", Color: colNoBudget, Width: 6, Markers: true}
	top := seedstudy.NFR1Ratio
	for _, iv := range intervals {
		r := seedstudy.SeedDistributed(seedstudy.SchemeDelayed, rate, iv, seed.LCGSeed)
		seedLine.Points = append(seedLine.Points, svgchart.Point{X: iv, Y: seedstudy.Ratio(r.Accepted, seedstudy.Limit)})
		for _, s := range []*svgchart.Series{&budget, &none} {
			r, err := seedstudy.LimiterdDistributed(seedstudy.LimiterdSim(iv, s == &budget), rate, seed.LCGSeed)
			if err != nil {
				return File{}, fmt.Errorf("plot: sync %g s: %w", iv, err)
			}
			s.Points = append(s.Points, svgchart.Point{X: iv, Y: seedstudy.Ratio(r.Accepted, seedstudy.Limit)})
			top = max(top, seedstudy.Ratio(r.Accepted, seedstudy.Limit))
		}
		top = max(top, seedstudy.Ratio(r.Accepted, seedstudy.Limit))
	}
	c := svgchart.Chart{
		Title: "Overshoot against the sync interval",
		Subtitle: fmt.Sprintf("%d nodes, one client at %d/s for one 60 s window (%d requests) on nodes drawn by the seed's LCG; limiterd's lines run the real counter, limiter and Engine.",
			seedstudy.DistNodes, rate, rate*seedstudy.DistWindowS),
		X: svgchart.Axis{Label: "sync interval (s, log scale)", Min: intervals[0] * 0.75, Max: intervals[len(intervals)-1] * 1.3, Log: true},
		Y: ratioAxis(top),
		// No budget underneath, drawn wide: where the two limiterd lines
		// coincide it shows as a border around the budget's line.
		Series: []svgchart.Series{none, budget, seedLine},
		HLines: limitLines(1),
	}
	for _, iv := range intervals {
		c.X.Ticks = append(c.X.Ticks, svgchart.Tick{V: iv, Label: strconv.FormatFloat(iv, 'f', -1, 64)})
	}
	return File{"cluster-sync-interval.svg", c}, nil
}

// clientRateChart draws the NFR1 table of limitsim burst: the most admitted
// in any 60 s interval over the limit against the client's rate, without
// the budget and with the default floor, and the bound derived for any rate.
func clientRateChart(rates []float64, durationMs int64) (File, error) {
	p := burst.Plan{DurationMs: durationMs, Rates: rates, Settings: []burst.Setting{burst.NoBudget(), burst.Floor1()}}
	br, err := p.Run()
	if err != nil {
		return File{}, fmt.Errorf("plot: %w", err)
	}
	none := svgchart.Series{Name: "no budget", Color: colNoBudget, Width: 2.5, Markers: true}
	budget := svgchart.Series{Name: "per-node budget, floor 1 (default)", Color: colLimiterd, Width: 2.5, Markers: true}
	top := seedstudy.NFR1Ratio
	for i, rate := range rates {
		for j, s := range []*svgchart.Series{&none, &budget} {
			v := seedstudy.Ratio(br.NFR1[i][j].MaxInWindow, seedstudy.Limit)
			s.Points = append(s.Points, svgchart.Point{X: rate, Y: v})
			top = max(top, v)
		}
	}
	bound := float64(burst.ClusterBound(burst.Floor1().Sim())) / seedstudy.Limit
	sc := clustersim.DefaultConfig()
	c := svgchart.Chart{
		Title: "Overshoot against the client's rate",
		Subtitle: fmt.Sprintf("%d nodes syncing every %g s, one client at a steady rate for %d s on nodes drawn by the seed's LCG; real counter, limiter and Engine.",
			sc.Nodes, sc.Sync.Seconds(), durationMs/1000),
		X:      svgchart.Axis{Label: "client rate (requests/s, log scale)", Min: rates[0] * 0.7, Max: rates[len(rates)-1] * 1.4, Log: true},
		Y:      ratioAxis(top),
		Series: []svgchart.Series{none, budget},
		HLines: append(limitLines(1), svgchart.HLine{Y: bound, Label: fmt.Sprintf("bound derived for the budget, any rate: %.3f", bound), Color: colLimiterd, Dash: dashBound}),
	}
	for _, v := range []float64{10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000} {
		if v >= c.X.Min && v <= c.X.Max {
			c.X.Ticks = append(c.X.Ticks, svgchart.Tick{V: v, Label: rateLabel(v)})
		}
	}
	return File{"cluster-client-rate.svg", c}, nil
}

// ratioAxis is the y axis of the cluster charts, from 0.9 to a little
// above top.
func ratioAxis(top float64) svgchart.Axis {
	hi := math.Ceil(top*1.05*10) / 10
	return svgchart.Axis{Label: "most accepted in any 60 s ÷ limit", Min: 0.9, Max: hi}
}

// rateLabel writes 1000 as "1k".
func rateLabel(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Plot builds the plan's charts and writes them into dir.
func Plot(dir string, p Plan) error {
	files, err := Build(p)
	if err != nil {
		return err
	}
	return Write(dir, files)
}
