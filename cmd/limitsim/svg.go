package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
)

// A small, dependency-free SVG writer for line charts: axes with ticks and
// labels, grid lines, polylines with optional markers, dashed horizontal
// reference lines and a legend. It writes the same bytes for the same chart
// on every platform (every number goes through strconv with a fixed
// precision, nothing iterates over a map), so the charts under docs/img can
// be golden-tested and regenerated without noise in a diff. It does not
// read fonts: text widths are estimated, which is why the legend has its
// own column rather than being fitted around the data.

// chart is one line chart.
type chart struct {
	title    string
	subtitle string // one line under the title; "" for none
	x, y     axis
	series   []series
	hlines   []hline
}

// axis is one axis. With log set the scale is logarithmic (base 10) and
// min must be > 0. Ticks are drawn where given; without any, linear axes
// get "nice" ticks (1, 2 or 5 times a power of ten).
type axis struct {
	label    string
	min, max float64
	log      bool
	ticks    []tick
}

// tick is one labelled tick on an axis.
type tick struct {
	v     float64
	label string
}

// series is one polyline: points in data units, in drawing order.
type series struct {
	name    string
	color   string  // any SVG colour, e.g. "#0072B2"
	width   float64 // stroke width in px
	dash    string  // stroke-dasharray, "" for a solid line
	markers bool    // a circle at every point, with its value as a tooltip
	points  []point
}

type point struct{ x, y float64 }

// hline is a dashed horizontal reference line across the plot, in the legend
// under its label.
type hline struct {
	y     float64
	label string
	color string
	dash  string
}

// Layout in px of the viewBox; the SVG scales to its container.
const (
	svgWidth      = 960
	svgHeight     = 480
	plotLeft      = 78
	plotTop       = 86
	plotRight     = 690 // the legend column starts after it
	plotBottom    = 416
	legendX       = 712
	legendRowStep = 22
	fontFamily    = "Helvetica, Arial, sans-serif"
	gridColor     = "#e3e3e3"
	axisColor     = "#444444"
	textColor     = "#222222"
	mutedColor    = "#555555"
)

// svg renders c. It panics only on a programming error in a chart
// definition (an empty axis range, a log axis through zero); the charts are
// built by code, never from input.
func (c chart) svg() []byte {
	var w svgBuf
	if !(c.x.max > c.x.min) || !(c.y.max > c.y.min) || (c.x.log && c.x.min <= 0) || (c.y.log && c.y.min <= 0) {
		panic(fmt.Sprintf("svg: chart %q has an invalid axis range", c.title))
	}
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="title desc" font-family="%s">`+"\n",
		svgWidth, svgHeight, svgWidth, svgHeight, fontFamily)
	w.printf(`<title id="title">%s</title>`+"\n", esc(c.title))
	w.printf(`<desc id="desc">%s</desc>`+"\n", esc(c.subtitle))
	w.printf(`<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	w.printf(`<text x="%d" y="28" font-size="18" font-weight="bold" fill="%s">%s</text>`+"\n", plotLeft, textColor, esc(c.title))
	// At most two lines of subtitle fit above the plot.
	for i, line := range wrap(c.subtitle, subtitleChars) {
		if i == 2 || line == "" {
			break
		}
		w.printf(`<text x="%d" y="%d" font-size="13" fill="%s">%s</text>`+"\n", plotLeft, 50+i*17, mutedColor, esc(line))
	}
	c.axes(&w)
	w.printf(`<clipPath id="plot"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`+"\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	for _, h := range c.hlines {
		y := c.py(h.y)
		if y < plotTop || y > plotBottom {
			continue // off the chart: still in the legend, with its value
		}
		w.printf(`<line class="hline" data-value="%s" x1="%d" y1="%s" x2="%d" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
			num(h.y, 6), plotLeft, num(y, 1), plotRight, num(y, 1), h.color, h.dash)
	}
	for _, s := range c.series {
		c.polyline(&w, s)
	}
	c.legend(&w)
	w.printf("</svg>\n")
	return w.Bytes()
}

// axes draws the grid, the axis lines, the ticks and their labels, and the
// axis labels.
func (c *chart) axes(w *svgBuf) {
	w.printf(`<g class="grid" stroke="%s" stroke-width="1">`+"\n", gridColor)
	for _, t := range c.yTicks() {
		y := num(c.py(t.v), 1)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", plotLeft, y, plotRight, y)
	}
	for _, t := range c.xTicks() {
		x := num(c.px(t.v), 1)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", x, plotTop, x, plotBottom)
	}
	w.printf("</g>\n")
	w.printf(`<g class="axes" stroke="%s" stroke-width="1.2">`+"\n", axisColor)
	w.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", plotLeft, plotBottom, plotRight, plotBottom)
	w.printf(`<line x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", plotLeft, plotTop, plotLeft, plotBottom)
	for _, t := range c.yTicks() {
		y := num(c.py(t.v), 1)
		w.printf(`<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", plotLeft-5, y, plotLeft, y)
	}
	for _, t := range c.xTicks() {
		x := num(c.px(t.v), 1)
		w.printf(`<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", x, plotBottom, x, plotBottom+5)
	}
	w.printf("</g>\n")
	w.printf(`<g class="ticks" font-size="12" fill="%s">`+"\n", textColor)
	for _, t := range c.yTicks() {
		w.printf(`<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", plotLeft-8, num(c.py(t.v)+4, 1), esc(t.label))
	}
	for _, t := range c.xTicks() {
		w.printf(`<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(c.px(t.v), 1), plotBottom+20, esc(t.label))
	}
	w.printf("</g>\n")
	midX := (plotLeft + plotRight) / 2
	midY := (plotTop + plotBottom) / 2
	w.printf(`<text x="%d" y="%d" font-size="13" text-anchor="middle" fill="%s">%s</text>`+"\n", midX, plotBottom+44, textColor, esc(c.x.label))
	w.printf(`<text x="20" y="%d" font-size="13" text-anchor="middle" fill="%s" transform="rotate(-90 20 %d)">%s</text>`+"\n",
		midY, textColor, midY, esc(c.y.label))
}

// polyline draws one series, clipped to the plot area.
func (c *chart) polyline(w *svgBuf, s series) {
	pts := make([]point, 0, len(s.points))
	for _, p := range s.points {
		pts = append(pts, point{round1(c.px(p.x)), round1(c.py(p.y))})
	}
	pts = simplify(pts)
	dash := ""
	if s.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
	}
	w.printf(`<g class="series" data-name="%s">`+"\n", esc(s.name))
	w.printf(`<polyline clip-path="url(#plot)" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"%s points="`, s.color, num(s.width, 2), dash)
	for i, p := range pts {
		if i > 0 {
			w.WriteByte(' ')
		}
		w.printf("%s,%s", num(p.x, 1), num(p.y, 1))
	}
	w.printf(`"/>` + "\n")
	if s.markers {
		for _, p := range s.points {
			w.printf(`<circle cx="%s" cy="%s" r="4" fill="%s" stroke="#ffffff" stroke-width="1"><title>%s: %s, %s</title></circle>`+"\n",
				num(c.px(p.x), 1), num(c.py(p.y), 1), s.color, esc(s.name), num(p.x, 3), num(p.y, 3))
		}
	}
	w.printf("</g>\n")
}

// legend draws one row per series, then one per reference line, in the
// column right of the plot. Long names wrap at the last space before
// legendChars.
func (c *chart) legend(w *svgBuf) {
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
	for _, s := range c.series {
		row(s.color, num(max(s.width, 2), 2), s.dash, s.name)
	}
	for _, h := range c.hlines {
		row(h.color, "1.5", h.dash, h.label)
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
func (c *chart) px(v float64) float64 {
	return plotLeft + c.x.frac(v)*(plotRight-plotLeft)
}

// py maps a data y to the viewBox (y grows downwards in SVG).
func (c *chart) py(v float64) float64 {
	return plotBottom - c.y.frac(v)*(plotBottom-plotTop)
}

// frac is where v lies on the axis, 0 at min and 1 at max.
func (a axis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

func (c *chart) xTicks() []tick { return c.x.tickList() }
func (c *chart) yTicks() []tick { return c.y.tickList() }

// tickList is the axis's ticks: the given ones, or nice ones.
func (a axis) tickList() []tick {
	if len(a.ticks) > 0 || a.log {
		return a.ticks
	}
	return niceTicks(a.min, a.max, 7)
}

// niceTicks returns about n ticks covering [lo, hi] at a step of 1, 2 or 5
// times a power of ten, each labelled with as many decimals as the step
// needs.
func niceTicks(lo, hi float64, n int) []tick {
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
	var ts []tick
	for i := math.Ceil(lo/step - 1e-9); i*step <= hi+step*1e-9; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, tick{v: v, label: strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return ts
}

// simplify drops points that add nothing to a polyline: repeats, and the
// middle of three points on one horizontal or vertical line (runs of equal
// counts are most of a window chart).
func simplify(pts []point) []point {
	out := make([]point, 0, len(pts))
	for _, p := range pts {
		if n := len(out); n > 0 && out[n-1] == p {
			continue
		}
		if n := len(out); n >= 2 {
			a, b := out[n-2], out[n-1]
			if (a.y == b.y && b.y == p.y) || (a.x == b.x && b.x == p.x) {
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
