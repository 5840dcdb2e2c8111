package limiter

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestParseInvalidGolden parses every file under testdata/invalid and
// compares the error messages with testdata/invalid.golden. Run
// `go test ./limiter -run Golden -update` after changing a message on purpose.
func TestParseInvalidGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	var got bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		rs, err := Parse(name, data)
		if err == nil {
			t.Errorf("%s: Parse succeeded with %d rules, want an error", name, len(rs.Rules))
			continue
		}
		if !errors.Is(err, ErrInvalidRules) {
			t.Errorf("%s: error %q does not wrap ErrInvalidRules", name, err)
		}
		if rs != nil {
			t.Errorf("%s: Parse returned a rule set with its error", name)
		}
		// Every message must place the problem in the file.
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
		got.WriteString("# " + name + "\n" + err.Error() + "\n\n")
	}
	golden := filepath.Join("testdata", "invalid.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("error messages differ from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), got.String()))
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 10; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl + "\n")
			shown++
		}
	}
	return b.String()
}

func TestParseErrorExample(t *testing.T) {
	// The message format the file format promises, checked literally.
	data := []byte("rules:\n  - name: default\n    limit: 600\n    window: 60s\n  - name: premium\n    match: \"premium:*\"\n    limit: -5\n    window: 60s\n")
	_, err := Parse("rules.yaml", data)
	want := `limiter: invalid rules: rules.yaml:7: rule "premium": field "limit": must be an integer between 1 and 2147483647, got -5`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestLoadShippedRules(t *testing.T) {
	rs, err := Load(filepath.Join("..", "testdata", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Name: "default", Limits: []LimitSpec{{Policy: "default", Limit: 600, Window: time.Minute, Slices: 12}}},
		{Name: "premium", Match: "premium:*", Limits: []LimitSpec{{Policy: "premium", Limit: 6000, Window: time.Minute, Slices: 12}}},
		{Name: "api", Match: "api:*", Limits: []LimitSpec{
			{Policy: "api/1s", Limit: 10, Window: time.Second, Slices: 12},
			{Policy: "api/60s", Limit: 600, Window: time.Minute, Slices: 12},
		}},
	}
	if len(rs.Rules) != len(want) {
		t.Fatalf("got %d rules, want %d", len(rs.Rules), len(want))
	}
	for i := range want {
		got := rs.Rules[i]
		if got.Line <= 0 {
			t.Errorf("rule %q: Line %d, want the rule's line", got.Name, got.Line)
		}
		got.Line = 0
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("rule %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
	if rs.Source != filepath.Join("..", "testdata", "rules.yaml") {
		t.Errorf("Source = %q", rs.Source)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalidRules) {
		t.Fatalf("got %v, want a not-exist error that is not ErrInvalidRules", err)
	}
}

func TestParseValid(t *testing.T) {
	one := func(policy string, limit int64, window time.Duration, slices int) []LimitSpec {
		return []LimitSpec{{Policy: policy, Limit: limit, Window: window, Slices: slices}}
	}
	tests := []struct {
		name string
		yaml string
		want []Rule // Line is checked separately
	}{
		{
			name: "minimal",
			yaml: "rules:\n  - {name: d, limit: 1, window: 1ms}\n",
			want: []Rule{{Name: "d", Limits: one("d", 1, time.Millisecond, 1)}},
		},
		{
			name: "default slices shrink for windows under 12ms",
			yaml: "rules:\n  - {name: d, limit: 5, window: 5ms}\n  - {name: e, match: e, limit: 5, window: 12ms}\n",
			want: []Rule{
				{Name: "d", Limits: one("d", 5, 5*time.Millisecond, 5)},
				{Name: "e", Match: "e", Limits: one("e", 5, 12*time.Millisecond, 12)},
			},
		},
		{
			name: "extremes",
			yaml: "rules:\n  - {name: d, limit: 2147483647, window: 720h, slices: 3600}\n",
			want: []Rule{{Name: "d", Limits: one("d", 2147483647, 720*time.Hour, 3600)}},
		},
		{
			name: "integer spellings and a window in other units",
			yaml: "rules:\n  - {name: d, limit: 0x10, window: 1m30s, slices: 0o12}\n",
			want: []Rule{{Name: "d", Limits: one("d", 16, 90*time.Second, 10)}},
		},
		{
			name: "shadow and name characters",
			yaml: "rules:\n  - name: A-z_0.9:x\n    match: 'a\\*b?'\n    limit: 3\n    window: 1s\n    shadow: true\n",
			want: []Rule{{Name: "A-z_0.9:x", Match: `a\*b?`, Shadow: true, Limits: one("A-z_0.9:x", 3, time.Second, 12)}},
		},
		{
			name: "numeric name is text",
			yaml: "rules:\n  - {name: 2024, limit: 3, window: 1s}\n",
			want: []Rule{{Name: "2024", Limits: one("2024", 3, time.Second, 12)}},
		},
		{
			name: "multi-limit policy names",
			yaml: "rules:\n  - name: m\n    limits:\n      - {limit: 1, window: 500ms}\n      - {limit: 5, window: 1500ms, slices: 3}\n      - {limit: 9, window: 2m}\n",
			want: []Rule{{Name: "m", Limits: []LimitSpec{
				{Policy: "m/500ms", Limit: 1, Window: 500 * time.Millisecond, Slices: 12},
				{Policy: "m/1500ms", Limit: 5, Window: 1500 * time.Millisecond, Slices: 3},
				{Policy: "m/120s", Limit: 9, Window: 2 * time.Minute, Slices: 12},
			}}},
		},
		{
			name: "one entry in limits is named after the rule",
			yaml: "rules:\n  - name: m\n    limits: [{limit: 1, window: 1s}]\n",
			want: []Rule{{Name: "m", Limits: one("m", 1, time.Second, 12)}},
		},
		{
			name: "no default rule, several patterns",
			yaml: "rules:\n  - {name: a, match: 'a:*', limit: 1, window: 1s}\n  - {name: b, match: '*', limit: 2, window: 1s}\n",
			want: []Rule{
				{Name: "a", Match: "a:*", Limits: one("a", 1, time.Second, 12)},
				{Name: "b", Match: "*", Limits: one("b", 2, time.Second, 12)},
			},
		},
		{
			name: "anchors and aliases",
			yaml: "rules:\n  - name: a\n    match: 'a:*'\n    limits: &std\n      - {limit: 10, window: 1s}\n      - {limit: 600, window: 60s}\n  - name: b\n    match: 'b:*'\n    limits: *std\n",
			want: []Rule{
				{Name: "a", Match: "a:*", Limits: []LimitSpec{{Policy: "a/1s", Limit: 10, Window: time.Second, Slices: 12}, {Policy: "a/60s", Limit: 600, Window: time.Minute, Slices: 12}}},
				{Name: "b", Match: "b:*", Limits: []LimitSpec{{Policy: "b/1s", Limit: 10, Window: time.Second, Slices: 12}, {Policy: "b/60s", Limit: 600, Window: time.Minute, Slices: 12}}},
			},
		},
		{
			name: "document marker and comments",
			yaml: "# rules\n---\nrules: # the list\n  - {name: d, limit: 1, window: 1s} # one rule\n...\n",
			want: []Rule{{Name: "d", Limits: one("d", 1, time.Second, 12)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := Parse("t.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if rs.Source != "t.yaml" {
				t.Errorf("Source = %q", rs.Source)
			}
			if len(rs.Rules) != len(tt.want) {
				t.Fatalf("got %d rules, want %d", len(rs.Rules), len(tt.want))
			}
			for i := range tt.want {
				got := rs.Rules[i]
				if got.Line < 2 {
					t.Errorf("rule %d: Line %d", i, got.Line)
				}
				got.Line = 0
				if !reflect.DeepEqual(got, tt.want[i]) {
					t.Errorf("rule %d:\n got %+v\nwant %+v", i, got, tt.want[i])
				}
			}
		})
	}
}

func TestParseRuleLines(t *testing.T) {
	rs, err := Parse("t.yaml", []byte("rules:\n\n  - name: a\n    match: a\n    limit: 1\n    window: 1s\n  - {name: b, limit: 1, window: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Rules[0].Line != 3 || rs.Rules[1].Line != 7 {
		t.Fatalf("lines %d, %d; want 3, 7", rs.Rules[0].Line, rs.Rules[1].Line)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	good := func() *RuleSet {
		return &RuleSet{Source: "code", Rules: []Rule{
			{Name: "d", Limits: []LimitSpec{{Policy: "d", Limit: 5, Window: time.Second, Slices: 10}}},
			{Name: "m", Match: "m:*", Limits: []LimitSpec{
				{Policy: "m/1s", Limit: 5, Window: time.Second, Slices: 10},
				{Policy: "m/60s", Limit: 50, Window: time.Minute, Slices: 12},
			}},
		}}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("valid set: %v", err)
	}
	tests := []struct {
		name   string
		change func(*RuleSet)
		want   string
	}{
		{"nil", nil, "nil rule set"},
		{"no rules", func(rs *RuleSet) { rs.Rules = nil }, "code: no rules"},
		{"bad name", func(rs *RuleSet) { rs.Rules[0].Name = "a b" }, `rules[0]: field "name": must contain only`},
		{"duplicate name", func(rs *RuleSet) {
			rs.Rules[1].Name = "d"
			rs.Rules[1].Limits[0].Policy = "d/1s"
			rs.Rules[1].Limits[1].Policy = "d/60s"
		}, `rules[1]: field "name": "d" is already the name`},
		{"bad pattern", func(rs *RuleSet) { rs.Rules[1].Match = `m\` }, `rule "m": field "match": ends in a lone`},
		{"invalid UTF-8 pattern", func(rs *RuleSet) { rs.Rules[1].Match = "m\xff" }, `rule "m": field "match": must be valid UTF-8`},
		{"two defaults", func(rs *RuleSet) { rs.Rules[1].Match = "" }, `rule "m": only one rule may omit "match"`},
		{"no limits", func(rs *RuleSet) { rs.Rules[0].Limits = nil }, `rule "d": no limits`},
		{"too many limits", func(rs *RuleSet) {
			for i := range 8 {
				w := time.Duration(i+2) * time.Minute
				rs.Rules[1].Limits = append(rs.Rules[1].Limits, LimitSpec{Policy: policyName("m", 3, w), Limit: 1, Window: w, Slices: 1})
			}
		}, `must list between 1 and 8 limits, got 10`},
		{"zero limit", func(rs *RuleSet) { rs.Rules[0].Limits[0].Limit = 0 }, `rule "d": field "limit": must be an integer between 1 and 2147483647, got 0`},
		{"sub-ms window", func(rs *RuleSet) { rs.Rules[0].Limits[0].Window = time.Microsecond }, `field "window": must be a whole number of milliseconds, got 1µs`},
		{"zero slices", func(rs *RuleSet) { rs.Rules[0].Limits[0].Slices = 0 }, `field "slices": must be an integer between 1 and 3600, got 0`},
		{"same windows", func(rs *RuleSet) {
			rs.Rules[1].Limits[1].Window = time.Second
			rs.Rules[1].Limits[1].Policy = "m/1s"
		}, `rule "m": limits[1]: field "window": 1s repeats the window of limits[0]`},
		{"wrong policy", func(rs *RuleSet) { rs.Rules[1].Limits[1].Policy = "m" }, `rule "m": limits[1]: Policy must be "m/60s", got "m"`},
		{"duplicate pattern", func(rs *RuleSet) {
			rs.Rules = append(rs.Rules, Rule{Name: "n", Match: "m:**", Limits: []LimitSpec{{Policy: "n", Limit: 1, Window: time.Second, Slices: 1}}})
		}, `rule "n": field "match": "m:**" is the same pattern as rule "m"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs *RuleSet
			if tt.change != nil {
				rs = good()
				tt.change(rs)
			}
			err := rs.Validate()
			if !errors.Is(err, ErrInvalidRules) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrInvalidRules containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParse checks that Parse never panics, that what it accepts validates
// and can be enforced, and that what it rejects wraps ErrInvalidRules. It
// also checks the parser's own field checks against Validate: a file the
// parser finds no fault with must validate, or a problem would be reported
// without the line of the field at fault.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{filepath.Join("testdata", "invalid", "*.yaml"), filepath.Join("..", "testdata", "*.yaml")} {
		files, _ := filepath.Glob(dir)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("rules:\n  - {name: a, match: 'a*?\\\\', limit: 1, window: 1s, shadow: true}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := parser{errs: newProblems("f.yaml")}
		if raw := p.file(data); p.errs.Err() == nil {
			if err := raw.Validate(); err != nil {
				t.Fatalf("the parser passed a set Validate rejects: %v", err)
			}
		}
		rs, err := Parse("f.yaml", data)
		if err != nil {
			if rs != nil || !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("rs %v, err %v", rs, err)
			}
			return
		}
		if err := rs.Validate(); err != nil {
			t.Fatalf("Parse accepted a set that does not validate: %v", err)
		}
		if _, err := New(newCounter(t), rs); err != nil {
			t.Fatalf("Parse accepted a set New rejects: %v", err)
		}
	})
}
