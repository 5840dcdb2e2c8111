package svgchart

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/svgchart/svgtest"
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
			got = append(got, tk.Label)
			if tk.V < tt.lo-1e-9 || tk.V > tt.hi+1e-9 {
				t.Errorf("[%g, %g]: tick %g outside the axis", tt.lo, tt.hi, tk.V)
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
	in := []Point{{0, 0}, {1, 0}, {2, 0}, {2, 0}, {3, 0}, {3, 5}, {3, 9}, {4, 9}, {5, 7}}
	want := []Point{{0, 0}, {3, 0}, {3, 9}, {4, 9}, {5, 7}}
	if got := simplify(in); !slices.Equal(got, want) {
		t.Errorf("simplify = %v, want %v", got, want)
	}
}

func TestAxisFrac(t *testing.T) {
	lin := Axis{Min: 0, Max: 200}
	log := Axis{Min: 10, Max: 1000, Log: true}
	for _, tt := range []struct {
		a    Axis
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

// testChart exercises escaping, a wrapped subtitle, markers, an empty
// series and a reference line off the chart.
func testChart() Chart {
	return Chart{
		Title:    `Escaping <tags> & "quotes"`,
		Subtitle: "a subtitle long enough to wrap onto a second line " + strings.Repeat("word ", 40),
		X:        Axis{Label: "x (s)", Min: 0, Max: 10},
		Y:        Axis{Label: "y < 2", Min: 0, Max: 2},
		Series: []Series{
			{Name: "a & b", Color: "#000000", Width: 2, Points: []Point{{0, 0}, {5, 1}, {10, 3}}, Markers: true},
			{Name: "empty", Color: "#111111", Width: 1},
		},
		HLines: []HLine{{Y: 1, Label: "one", Color: "#555555", Dash: "4 4"}, {Y: 5, Label: "off the chart", Color: "#555555"}},
	}
}

func TestChartSVGWellFormed(t *testing.T) {
	c := testChart()
	b := c.SVG()
	els := svgtest.Parse(t, b)
	if got := svgtest.Find(els, "title", "id", "title"); len(got) != 1 || got[0].Text != c.Title {
		t.Errorf("title elements %v, want one with %q", got, c.Title)
	}
	if got := svgtest.Find(els, "polyline", "", ""); len(got) != 2 {
		t.Errorf("%d polylines, want 2", len(got))
	}
	if got := svgtest.Find(els, "line", "data-value", "1"); len(got) != 1 {
		t.Errorf("no reference line at y=1")
	}
	if got := svgtest.Find(els, "line", "data-value", "5"); len(got) != 0 {
		t.Errorf("a reference line above the axis was drawn")
	}
	if got := svgtest.Find(els, "circle", "", ""); len(got) != 3 {
		t.Errorf("%d markers, want 3", len(got))
	}
	sub := 0
	for _, e := range els {
		if e.Name == "text" && (strings.HasPrefix(e.Text, "a subtitle") || strings.HasPrefix(e.Text, "word")) {
			sub++
		}
	}
	if sub != 2 {
		t.Errorf("the subtitle takes %d lines, want 2 (the rest cut)", sub)
	}
	if !bytes.Equal(b, c.SVG()) {
		t.Error("two renderings of one chart differ")
	}
	for _, bad := range []Chart{
		{X: Axis{Min: 1, Max: 1}, Y: Axis{Min: 0, Max: 1}},
		{X: Axis{Min: 0, Max: 10, Log: true}, Y: Axis{Min: 0, Max: 1}},
		{X: Axis{Min: 0, Max: 1}, Y: Axis{Min: 0, Max: 1}, Height: MinHeight - 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("chart with axes %+v %+v, height %d rendered without a panic", bad.X, bad.Y, bad.Height)
				}
			}()
			bad.SVG()
		}()
	}
}

// TestHeight checks that a lower chart keeps its top and margins and
// flattens only the plot: the axis runs from the plot's top to 64 px above
// the bottom, and the default is 480.
func TestHeight(t *testing.T) {
	for _, tt := range []struct{ height, bottom int }{{0, 416}, {480, 416}, {300, 236}, {MinHeight, MinHeight - 64}} {
		c := testChart()
		c.Height = tt.height
		els := svgtest.Parse(t, c.SVG())
		want := "0 0 960 " + itoa(tt.bottom+64)
		if got := els[0].Attrs["viewBox"]; got != want {
			t.Errorf("height %d: viewBox %q, want %q", tt.height, got, want)
		}
		clip := svgtest.Find(els, "rect", "", "")
		if len(clip) != 2 || clip[1].Attrs["height"] != itoa(tt.bottom-86) {
			t.Errorf("height %d: plot rect %v, want height %d", tt.height, clip, tt.bottom-86)
		}
		// y = 0 lies on the bottom edge, y = 2 (the top of the axis) on the top.
		var ys []string
		for _, e := range svgtest.Find(els, "circle", "", "") {
			ys = append(ys, e.Attrs["cy"])
		}
		if !slices.Equal(ys[:2], []string{itoa(tt.bottom), itoa((tt.bottom + 86) / 2)}) {
			t.Errorf("height %d: markers at y %q, want %d and %d", tt.height, ys, tt.bottom, (tt.bottom+86)/2)
		}
	}
	// The default layout is unchanged by an explicit 480.
	a, b := testChart(), testChart()
	b.Height = 480
	if !bytes.Equal(a.SVG(), b.SVG()) {
		t.Error("Height 480 renders differently from the default")
	}
}

// TestStack checks that stacked charts are each drawn as they would be
// alone, one under the other, with ids of their own.
func TestStack(t *testing.T) {
	a, b := testChart(), testChart()
	b.Title, b.Height = "second", 300
	out := Stack("two & more", "a stack", a, b)
	els := svgtest.Parse(t, out)
	if got := els[0].Attrs["viewBox"]; got != "0 0 960 780" {
		t.Errorf("viewBox %q, want 0 0 960 780", got)
	}
	nested := svgtest.Find(els, "svg", "", "")[1:]
	if len(nested) != 2 || nested[0].Attrs["y"] != "0" || nested[1].Attrs["y"] != "480" || nested[1].Attrs["height"] != "300" {
		t.Errorf("nested charts %v, want at y 0 (480 high) and 480 (300 high)", nested)
	}
	ids := map[string]bool{}
	for _, e := range els {
		if id := e.Attrs["id"]; id != "" {
			if ids[id] {
				t.Errorf("id %q twice", id)
			}
			ids[id] = true
		}
	}
	for _, id := range []string{"title", "desc", "title-1", "desc-1", "plot-1", "title-2", "desc-2", "plot-2"} {
		if !ids[id] {
			t.Errorf("no element with id %q", id)
		}
	}
	for i, p := range svgtest.Find(els, "polyline", "", "") {
		want := "url(#plot-" + itoa(1+i/2) + ")"
		if p.Attrs["clip-path"] != want {
			t.Errorf("polyline %d clipped by %q, want %q", i, p.Attrs["clip-path"], want)
		}
	}
	// The first chart's body is the standalone chart's, ids aside.
	alone := string(a.SVG())
	body := alone[strings.Index(alone, "\n")+1 : strings.LastIndex(alone, "</svg>")]
	body = strings.NewReplacer(`id="title"`, `id="title-1"`, `id="desc"`, `id="desc-1"`, `id="plot"`, `id="plot-1"`, "#plot)", "#plot-1)").Replace(body)
	if !strings.Contains(string(out), body) {
		t.Error("the first stacked chart differs from the chart alone")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("an empty stack rendered without a panic")
			}
		}()
		Stack("none", "")
	}()
}

func itoa(i int) string { return strconv.Itoa(i) }
