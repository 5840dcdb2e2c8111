// Package svgchart is limiterd's one SVG writer for line charts: axes with
// ticks and labels, grid lines, polylines with optional markers, dashed
// horizontal reference lines and a legend, one chart to a file (Chart.SVG)
// or several stacked in one (Stack). limitsim's charts and the e2e soak's
// use it.
//
// It writes the same bytes for the same chart on every platform (every
// number goes through strconv with a fixed precision, nothing iterates over
// a map), so the charts under docs/img can be golden-tested and regenerated
// without noise in a diff. It does not read fonts: text widths are
// estimated, which is why the legend has its own column rather than being
// fitted around the data. It has no dependency beyond the standard library.
package svgchart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// Chart is one line chart.
type Chart struct {
	Title    string
	Subtitle string // one line under the title (two if it wraps); "" for none
	X, Y     Axis
	Series   []Series
	HLines   []HLine
	// Height is the chart's height in px of the viewBox; 0 is the default
	// 480. The plot area always starts 86 px below the top (title and
	// subtitle) and ends 64 px above the bottom (tick and axis labels), so
	// a lower chart has a flatter plot; at least MinHeight.
	Height int
}

// Axis is one axis. With Log set the scale is logarithmic (base 10) and
// Min must be > 0. Ticks are drawn where given; without any, linear axes
// get "nice" ticks (1, 2 or 5 times a power of ten).
type Axis struct {
	Label    string
	Min, Max float64
	Log      bool
	Ticks    []Tick
}

// Tick is one labelled tick on an axis.
type Tick struct {
	V     float64
	Label string
}

// Series is one polyline: points in data units, in drawing order.
type Series struct {
	Name    string
	Color   string  // any SVG colour, e.g. "#0072B2"
	Width   float64 // stroke width in px
	Dash    string  // stroke-dasharray, "" for a solid line
	Markers bool    // a circle at every point, with its value as a tooltip
	Points  []Point
}

// Point is one point of a series, in data units.
type Point struct{ X, Y float64 }

// HLine is a dashed horizontal reference line across the plot, in the
// legend under its label.
type HLine struct {
	Y     float64
	Label string
	Color string
	Dash  string
}

// Layout in px of the viewBox; the SVG scales to its container.
const (
	svgWidth      = 960
	defaultHeight = 480
	plotLeft      = 78
	plotTop       = 86
	plotRight     = 690 // the legend column starts after it
	bottomMargin  = 64  // below the plot: tick labels, axis label
	legendX       = 712
	legendRowStep = 22
	fontFamily    = "Helvetica, Arial, sans-serif"
	gridColor     = "#e3e3e3"
	axisColor     = "#444444"
	textColor     = "#222222"
	mutedColor    = "#555555"
)

// MinHeight is the lowest Chart.Height: a plot area of 90 px, room for a
// few ticks and legend rows.
const MinHeight = plotTop + 90 + bottomMargin

// SVG renders c as a standalone SVG document. It panics only on a
// programming error in a chart definition (an empty axis range, a log axis
// through zero, a height below MinHeight); the charts are built by code,
// never from input.
func (c Chart) SVG() []byte {
	c.validate()
	var w svgBuf
	h := c.height()
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="title desc" font-family="%s">`+"\n",
		svgWidth, h, svgWidth, h, fontFamily)
	c.body(&w, "")
	w.printf("</svg>\n")
	return w.Bytes()
}

// Stack renders charts one above the other, full width, in one SVG
// document titled title (desc its description, for screen readers): a
// page of small charts that share an x axis, say, and are read together.
// Each chart is a nested <svg> whose ids carry its index, so that the
// clip paths and titles of one never apply to another. It panics as SVG
// does, and on no chart.
func Stack(title, desc string, charts ...Chart) []byte {
	if len(charts) == 0 {
		panic(fmt.Sprintf("svgchart: stack %q has no chart", title))
	}
	total := 0
	for _, c := range charts {
		c.validate()
		total += c.height()
	}
	var w svgBuf
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="title desc" font-family="%s">`+"\n",
		svgWidth, total, svgWidth, total, fontFamily)
	w.printf(`<title id="title">%s</title>`+"\n", esc(title))
	w.printf(`<desc id="desc">%s</desc>`+"\n", esc(desc))
	y := 0
	for i, c := range charts {
		id := "-" + strconv.Itoa(i+1)
		h := c.height()
		w.printf(`<svg x="0" y="%d" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="title%s desc%s">`+"\n",
			y, svgWidth, h, svgWidth, h, id, id)
		c.body(&w, id)
		w.printf("</svg>\n")
		y += h
	}
	w.printf("</svg>\n")
	return w.Bytes()
}

// validate panics on a chart no data can be drawn on.
func (c Chart) validate() {
	if !(c.X.Max > c.X.Min) || !(c.Y.Max > c.Y.Min) || (c.X.Log && c.X.Min <= 0) || (c.Y.Log && c.Y.Min <= 0) {
		panic(fmt.Sprintf("svg: chart %q has an invalid axis range", c.Title))
	}
	if c.Height != 0 && c.Height < MinHeight {
		panic(fmt.Sprintf("svg: chart %q is %d px high, below %d", c.Title, c.Height, MinHeight))
	}
}

func (c Chart) height() int {
	if c.Height == 0 {
		return defaultHeight
	}
	return c.Height
}

// plotBottom is the lower edge of the plot area.
func (c *Chart) plotBottom() int { return c.height() - bottomMargin }

// body writes everything inside the <svg> element; id is appended to every
// id the chart defines (its title, description and clip path).
func (c *Chart) body(w *svgBuf, id string) {
	w.printf(`<title id="title%s">%s</title>`+"\n", id, esc(c.Title))
	w.printf(`<desc id="desc%s">%s</desc>`+"\n", id, esc(c.Subtitle))
	w.printf(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, c.height())
	w.printf(`<text x="%d" y="28" font-size="18" font-weight="bold" fill="%s">%s</text>`+"\n", plotLeft, textColor, esc(c.Title))
	// At most two lines of subtitle fit above the plot.
	for i, line := range wrap(c.Subtitle, subtitleChars) {
		if i == 2 || line == "" {
			break
		}
		w.printf(`<text x="%d" y="%d" font-size="13" fill="%s">%s</text>`+"\n", plotLeft, 50+i*17, mutedColor, esc(line))
	}
	c.axes(w)
	bottom := c.plotBottom()
	w.printf(`<clipPath id="plot%s"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`+"\n",
		id, plotLeft, plotTop, plotRight-plotLeft, bottom-plotTop)
	for _, h := range c.HLines {
		y := c.py(h.Y)
		if y < plotTop || y > float64(bottom) {
			continue // off the chart: still in the legend, with its value
		}
		w.printf(`<line class="hline" data-value="%s" x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
			num(h.Y, 6), plotLeft, num(y, 1), plotRight, num(y, 1), h.Color, h.Dash)
	}
	for _, s := range c.Series {
		c.polyline(w, s, id)
	}
	c.legend(w)
}

// axes draws the grid, the axis lines, the ticks and their labels, and the
// axis labels.
func (c *Chart) axes(w *svgBuf) {
	bottom := c.plotBottom()
	w.printf(`<g class="grid" stroke="%s" stroke-width="1">`+"\n", gridColor)
	for _, t := range c.yTicks() {
		y := num(c.py(t.V), 1)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", plotLeft, y, plotRight, y)
	}
	for _, t := range c.xTicks() {
		x := num(c.px(t.V), 1)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", x, plotTop, x, bottom)
	}
	w.printf("</g>\n")
	w.printf(`<g class="axes" stroke="%s" stroke-width="1.2">`+"\n", axisColor)
	w.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", plotLeft, bottom, plotRight, bottom)
	w.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", plotLeft, plotTop, plotLeft, bottom)
	for _, t := range c.yTicks() {
		y := num(c.py(t.V), 1)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", plotLeft-5, y, plotLeft, y)
	}
	for _, t := range c.xTicks() {
		x := num(c.px(t.V), 1)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", x, bottom, x, bottom+5)
	}
	w.printf("</g>\n")
	w.printf(`<g class="ticks" font-size="12" fill="%s">`+"\n", textColor)
	for _, t := range c.yTicks() {
		w.printf(`<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", plotLeft-8, num(c.py(t.V)+4, 1), esc(t.Label))
	}
	for _, t := range c.xTicks() {
		w.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(c.px(t.V), 1), bottom+20, esc(t.Label))
	}
	w.printf("</g>\n")
	midX := (plotLeft + plotRight) / 2
	midY := (plotTop + bottom) / 2
	w.printf(`<text x="%d" y="%d" font-size="13" text-anchor="middle" fill="%s">%s</text>`+"\n", midX, bottom+44, textColor, esc(c.X.Label))
	w.printf(`<text x="20" y="%d" font-size="13" text-anchor="middle" fill="%s" transform="rotate(-90 20 %d)">%s</text>`+"\n",
		midY, textColor, midY, esc(c.Y.Label))
}

// polyline draws one series, clipped to the plot area (the clip path of
// the chart whose ids end in id).
func (c *Chart) polyline(w *svgBuf, s Series, id string) {
	pts := make([]Point, 0, len(s.Points))
	for _, p := range s.Points {
		pts = append(pts, Point{round1(c.px(p.X)), round1(c.py(p.Y))})
	}
	pts = simplify(pts)
	dash := ""
	if s.Dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.Dash)
	}
	w.printf(`<g class="series" data-name="%s">`+"\n", esc(s.Name))
	w.printf(`<polyline clip-path="url(#plot%s)" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s points="`, id, s.Color, num(s.Width, 2), dash)
	for i, p := range pts {
		if i > 0 {
			w.WriteByte(' ')
		}
		w.printf("%s,%s", num(p.X, 1), num(p.Y, 1))
	}
	w.printf(`"/>` + "\n")
	if s.Markers {
		for _, p := range s.Points {
			w.printf(`<circle cx="%s" cy="%s" r="4" fill="%s" stroke="#ffffff" stroke-width="1"><title>%s: %s, %s</title></circle>`+"\n",
				num(c.px(p.X), 1), num(c.py(p.Y), 1), s.Color, esc(s.Name), num(p.X, 3), num(p.Y, 3))
		}
	}
	w.printf("</g>\n")
}

// legend draws one row per series, then one per reference line, in the
// column right of the plot. Long names wrap at the last space before
// legendChars.
func (c *Chart) legend(w *svgBuf) {
	y := plotTop + 6
	w.printf(`<g class="legend" font-size="12" fill="%s">`+"\n", textColor)
	row := func(color, width, dash, name string) {
		d := ""
		if dash != "" {
			d = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
		}
		w.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%s"%s/>`+"\n", legendX, y, legendX+28, y, color, width, d)
		lines := wrap(name, legendChars)
		for i, part := range lines {
			w.printf(`<text x="%d" y="%d">%s</text>`+"\n", legendX+36, y+4+i*15, esc(part))
		}
		y += legendRowStep + 15*(len(lines)-1)
	}
	for _, s := range c.Series {
		row(s.Color, num(max(s.Width, 2), 2), s.Dash, s.Name)
	}
	for _, h := range c.HLines {
		row(h.Color, "1.5", h.Dash, h.Label)
	}
	w.printf("</g>\n")
}

// subtitleChars is roughly how many characters of 13 px text fit on a
// subtitle line.
const subtitleChars = 132

// legendChars is roughly how many characters of 12 px text fit in the legend
// column.
const legendChars = 34

// wrap splits s into lines of at most n bytes at spaces (a longer word gets
// a line of its own).
func wrap(s string, n int) []string {
	var lines []string
	for len(s) > n {
		cut := -1
		for i := n; i > 0; i-- {
			if s[i] == ' ' {
				cut = i
				break
			}
		}
		if cut < 0 {
			break
		}
		lines = append(lines, s[:cut])
		s = s[cut+1:]
	}
	return append(lines, s)
}

// px maps a data x to the viewBox.
func (c *Chart) px(v float64) float64 {
	return plotLeft + c.X.frac(v)*(plotRight-plotLeft)
}

// py maps a data y to the viewBox (y grows downwards in SVG).
func (c *Chart) py(v float64) float64 {
	bottom := float64(c.plotBottom())
	return bottom - c.Y.frac(v)*(bottom-plotTop)
}

// frac is where v lies on the axis, 0 at min and 1 at max.
func (a Axis) frac(v float64) float64 {
	if a.Log {
		return (math.Log10(v) - math.Log10(a.Min)) / (math.Log10(a.Max) - math.Log10(a.Min))
	}
	return (v - a.Min) / (a.Max - a.Min)
}

func (c *Chart) xTicks() []Tick { return c.X.tickList() }
func (c *Chart) yTicks() []Tick { return c.Y.tickList() }

// tickList is the axis's ticks: the given ones, or nice ones.
func (a Axis) tickList() []Tick {
	if len(a.Ticks) > 0 || a.Log {
		return a.Ticks
	}
	return niceTicks(a.Min, a.Max, 7)
}

// niceTicks returns about n ticks covering [lo, hi] at a step of 1, 2 or 5
// times a power of ten, each labelled with as many decimals as the step
// needs.
func niceTicks(lo, hi float64, n int) []Tick {
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	var ts []Tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, Tick{V: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ts
}

// simplify drops points that add nothing to a polyline: repeats, and the
// middle of three points on one horizontal or vertical line (runs of equal
// counts are most of a window chart).
func simplify(pts []Point) []Point {
	out := make([]Point, 0, len(pts))
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1] == p {
			continue
		}
		if n := len(out); n >= 2 {
			a, b := out[n-2], out[n-1]
			if (a.Y == b.Y && b.Y == p.Y) || (a.X == b.X && b.X == p.X) {
				out[n-1] = p
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// round1 rounds to one decimal, the precision of every coordinate written.
func round1(v float64) float64 { return math.Round(v*10) / 10 }

// num formats v with at most prec decimals and no trailing zeros, never
// "-0".
func num(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if prec > 0 {
		for s[len(s)-1] == '0' {
			s = s[:len(s)-1]
		}
		if s[len(s)-1] == '.' {
			s = s[:len(s)-1]
		}
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// esc escapes text for an SVG text node or attribute value.
func esc(s string) string {
	var b bytes.Buffer
	// EscapeText escapes the five XML specials and control characters; it
	// fails only on a writer error, which bytes.Buffer never returns.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// svgBuf is a bytes.Buffer with printf.
type svgBuf struct{ bytes.Buffer }

func (b *svgBuf) printf(format string, a ...any) { fmt.Fprintf(&b.Buffer, format, a...) }
