package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []string
	}{
		{0, 180, []string{"0", "50", "100", "150"}},
		{0, 1300, []string{"0", "200", "400", "600", "800", "1000", "1200"}},
		{0.9, 1.6, []string{"0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6"}},
		{0.9, 3.5, []string{"1.0", "1.5", "2.0", "2.5", "3.0", "3.5"}},
		{-1, 1, []string{"-1.0", "-0.5", "0.0", "0.5", "1.0"}},
	}
	for _, tt := range tests {
		var got []string
		for _, tk := range niceTicks(tt.lo, tt.hi, 7) {
			got = append(got, tk.label)
			if tk.v < tt.lo-1e-9 || tk.v > tt.hi+1e-9 {
				t.Errorf("[%g, %g]: tick %g outside the axis", tt.lo, tt.hi, tk.v)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("niceTicks(%g, %g) = %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestNum(t *testing.T) {
	tests := []struct {
		v    float64
		prec int
		want string
	}{
		{1, 1, "1"}, {1.25, 1, "1.2"}, {1.05, 2, "1.05"}, {-0.0001, 1, "0"}, {600, 6, "600"},
		{660.0000000001, 6, "660"}, {0.1 + 0.2, 6, "0.3"}, {12.5, 0, "12"}, {-3.5, 1, "-3.5"},
	}
	for _, tt := range tests {
		if got := num(tt.v, tt.prec); got != tt.want {
			t.Errorf("num(%v, %d) = %q, want %q", tt.v, tt.prec, got, tt.want)
		}
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"short", 10, []string{"short"}},
		{"", 10, []string{""}},
		{"token bucket (60, 10/s): max 159", 20, []string{"token bucket (60,", "10/s): max 159"}},
		{"averyveryverylongword and more", 8, []string{"averyveryverylongword and more"}},
		{"a b c d", 3, []string{"a b", "c d"}},
	}
	for _, tt := range tests {
		if got := wrap(tt.s, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestSimplify(t *testing.T) {
	in := []point{{0, 0}, {1, 0}, {2, 0}, {2, 0}, {3, 0}, {3, 5}, {3, 9}, {4, 9}, {5, 7}}
	want := []point{{0, 0}, {3, 0}, {3, 9}, {4, 9}, {5, 7}}
	if got := simplify(in); !slices.Equal(got, want) {
		t.Errorf("simplify = %v, want %v", got, want)
	}
}

func TestAxisFrac(t *testing.T) {
	lin := axis{min: 0, max: 200}
	log := axis{min: 10, max: 1000, log: true}
	for _, tt := range []struct {
		a    axis
		v    float64
		want float64
	}{
		{lin, 0, 0}, {lin, 50, 0.25}, {lin, 200, 1}, {log, 10, 0}, {log, 100, 0.5}, {log, 1000, 1},
	} {
		if got := tt.a.frac(tt.v); got < tt.want-1e-12 || got > tt.want+1e-12 {
			t.Errorf("frac(%v) on %+v = %v, want %v", tt.v, tt.a, got, tt.want)
		}
	}
}

// svgElement is what the structural tests read of an SVG: every element
// with its attributes and text, in document order.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

// parseSVG checks that b is well-formed XML with one <svg> root carrying a
// viewBox, and returns its elements.
func parseSVG(t *testing.T, b []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var (
		els   []svgElement
		stack []int
		depth int
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (tk.Name.Local != "svg" || tk.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v, want svg in the SVG namespace", tk.Name)
			}
			e := svgElement{name: tk.Name.Local, attrs: map[string]string{}}
			for _, a := range tk.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			els = append(els, e)
			stack = append(stack, len(els)-1)
			depth++
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			depth--
		case xml.CharData:
			if len(stack) > 0 {
				els[stack[len(stack)-1]].text += string(tk)
			}
		}
	}
	if len(els) == 0 || els[0].attrs["viewBox"] == "" {
		t.Fatal("no <svg viewBox=...> root")
	}
	return els
}

// find returns the elements named name whose attribute key is value (any
// value for key "").
func find(els []svgElement, name, key, value string) []svgElement {
	var out []svgElement
	for _, e := range els {
		if e.name == name && (key == "" || e.attrs[key] == value) {
			out = append(out, e)
		}
	}
	return out
}

func TestChartSVGWellFormed(t *testing.T) {
	c := chart{
		title:    `Escaping <tags> & "quotes"`,
		subtitle: "a subtitle long enough to wrap onto a second line " + strings.Repeat("word ", 40),
		x:        axis{label: "x (s)", min: 0, max: 10},
		y:        axis{label: "y < 2", min: 0, max: 2},
		series: []series{
			{name: "a & b", color: "#000000", width: 2, points: []point{{0, 0}, {5, 1}, {10, 3}}, markers: true},
			{name: "empty", color: "#111111", width: 1},
		},
		hlines: []hline{{y: 1, label: "one", color: "#555555", dash: "4 4"}, {y: 5, label: "off the chart", color: "#555555"}},
	}
	b := c.svg()
	els := parseSVG(t, b)
	if got := find(els, "title", "id", "title"); len(got) != 1 || got[0].text != c.title {
		t.Errorf("title elements %v, want one with %q", got, c.title)
	}
	if got := find(els, "polyline", "", ""); len(got) != 2 {
		t.Errorf("%d polylines, want 2", len(got))
	}
	if got := find(els, "line", "data-value", "1"); len(got) != 1 {
		t.Errorf("no reference line at y=1")
	}
	if got := find(els, "line", "data-value", "5"); len(got) != 0 {
		t.Errorf("a reference line above the axis was drawn")
	}
	if got := find(els, "circle", "", ""); len(got) != 3 {
		t.Errorf("%d markers, want 3", len(got))
	}
	sub := 0
	for _, e := range els {
		if e.name == "text" && (strings.HasPrefix(e.text, "a subtitle") || strings.HasPrefix(e.text, "word")) {
			sub++
		}
	}
	if sub != 2 {
		t.Errorf("the subtitle takes %d lines, want 2 (the rest cut)", sub)
	}
	if !bytes.Equal(b, c.svg()) {
		t.Error("two renderings of one chart differ")
	}
	for _, bad := range []chart{
		{x: axis{min: 1, max: 1}, y: axis{min: 0, max: 1}},
		{x: axis{min: 0, max: 10, log: true}, y: axis{min: 0, max: 1}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("chart with axes %+v %+v rendered without a panic", bad.x, bad.y)
				}
			}()
			bad.svg()
		}()
	}
}
