package envoyrules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/counter"
)

// FuzzParse checks that Parse never panics, that it returns either an error
// wrapping ErrInvalidConfig or a Config that holds every invariant, and that
// such a Config written back as YAML parses again to the same Config.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"domain: d\ndescriptors: &l\n  - key: k\n    descriptors: *l\n",
		"domain: d\ndescriptors:\n  - <<: &m {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n  - <<: *m\n    key: j\n",
		"domain: d\ndescriptors:\n  - {key: a_b}\n  - {key: a, value: b}\n",
		"domain: d\ndescriptors:\n  - key: z\n    shadow_mode: true\n    rate_limit: {unit: week, requests_per_unit: 0, name: n}\n",
		"domain: d\ndescriptors:\n  - key: '*'\n    value: '*'\n    rate_limit: {unlimited: yes, replaces: [{name: x}]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) || c != nil {
				t.Fatalf("Parse = %v, %v: want nil and an error wrapping ErrInvalidConfig", c, err)
			}
			return
		}
		checkInvariants(t, c)
		again, err := Parse("again.yaml", encode(t, c))
		if err != nil {
			t.Fatalf("the config written back does not parse: %v\n%s", err, encode(t, c))
		}
		if a, b := flatten(c), flatten(again); !slices.Equal(a, b) {
			t.Fatalf("round trip changed the config:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
	})
}

// checkInvariants fails unless c is what Parse promises.
func checkInvariants(t *testing.T, c *Config) {
	t.Helper()
	if c.Domain == "" {
		t.Fatal("empty domain")
	}
	checkNames(t, "fuzz", c)
	var walk func(list []*Descriptor, parent string, depth int)
	walk = func(list []*Descriptor, parent string, depth int) {
		if depth > maxDepth {
			t.Fatalf("descriptors nest %d deep", depth)
		}
		seen := map[string]bool{}
		for _, d := range list {
			comp := compositeOf(d)
			switch {
			case d.Key == "":
				t.Fatalf("%s: empty key", d.Path)
			case seen[comp]:
				t.Fatalf("%s: duplicate composite key", d.Path)
			case d.Path != parent+"."+comp:
				t.Fatalf("path %q, want %q", d.Path, parent+"."+comp)
			case d.Wildcard != strings.Contains(comp, "*"):
				t.Fatalf("%s: Wildcard = %v", d.Path, d.Wildcard)
			}
			seen[comp] = true
			if l := d.Limit; l != nil {
				if l.Unlimited {
					if l.Unit != "" || l.RequestsPerUnit != 0 || l.Window != 0 {
						t.Fatalf("%s: unlimited with %+v", d.Path, *l)
					}
				} else if l.RequestsPerUnit > counter.MaxLimit || l.DeniesAll() != (l.RequestsPerUnit == 0) || l.Window != unitWindows[l.Unit] || l.Window <= 0 || l.Window > counter.MaxWindow {
					t.Fatalf("%s: bad limit %+v", d.Path, *l)
				}
				for _, r := range d.Replaces {
					if r == "" || r == l.Name {
						t.Fatalf("%s: replaces %q", d.Path, r)
					}
				}
			} else if d.Replaces != nil {
				t.Fatalf("%s: replaces without a limit", d.Path)
			}
			walk(d.Descriptors, d.Path, depth+1)
		}
	}
	walk(c.Descriptors, c.Domain, 1)
	// A node with a limit is found by its own keys and values, when every
	// node on its path has a value (an empty value is looked up as
	// "key_" first, which a sibling may match).
	walkPaths(c.Descriptors, nil, func(path []Entry, d *Descriptor) {
		if d.Limit == nil || slices.ContainsFunc(path, func(e Entry) bool { return e.Value == "" }) {
			return
		}
		if got := c.Match(path); got != d {
			t.Fatalf("Match(%v) = %s, want %s", path, summary(got), d.Path)
		}
	})
}

type yDescriptor struct {
	Key         string        `yaml:"key"`
	Value       string        `yaml:"value,omitempty"`
	RateLimit   *yRateLimit   `yaml:"rate_limit,omitempty"`
	ShadowMode  bool          `yaml:"shadow_mode,omitempty"`
	Descriptors []yDescriptor `yaml:"descriptors,omitempty"`
}

type yRateLimit struct {
	Unit            string     `yaml:"unit,omitempty"`
	RequestsPerUnit *uint32    `yaml:"requests_per_unit,omitempty"` // nil when unlimited; 0 is written
	Unlimited       bool       `yaml:"unlimited,omitempty"`
	Name            string     `yaml:"name,omitempty"`
	Replaces        []yReplace `yaml:"replaces,omitempty"`
}

type yReplace struct {
	Name string `yaml:"name"`
}

// encode writes c back in the file format.
func encode(t *testing.T, c *Config) []byte {
	var conv func([]*Descriptor) []yDescriptor
	conv = func(list []*Descriptor) []yDescriptor {
		var out []yDescriptor
		for _, d := range list {
			y := yDescriptor{Key: d.Key, Value: d.Value, ShadowMode: d.ShadowMode, Descriptors: conv(d.Descriptors)}
			if l := d.Limit; l != nil {
				y.RateLimit = &yRateLimit{Unit: strings.ToLower(l.Unit), Unlimited: l.Unlimited, Name: l.Name}
				if !l.Unlimited {
					y.RateLimit.RequestsPerUnit = &l.RequestsPerUnit
				}
				for _, r := range d.Replaces {
					y.RateLimit.Replaces = append(y.RateLimit.Replaces, yReplace{r})
				}
			}
			out = append(out, y)
		}
		return out
	}
	data, err := yaml.Marshal(struct {
		Domain      string        `yaml:"domain"`
		Descriptors []yDescriptor `yaml:"descriptors,omitempty"`
	}{c.Domain, conv(c.Descriptors)})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// flatten lists every node's exported fields and rule name, for comparing.
func flatten(c *Config) []string {
	out := []string{c.Domain}
	walkPaths(c.Descriptors, nil, func(_ []Entry, d *Descriptor) {
		l := "no limit"
		if d.Limit != nil {
			l = fmt.Sprintf("%+v", *d.Limit)
		}
		out = append(out, fmt.Sprintf("%q %q %v %s %v %v %q %q", d.Key, d.Value, d.Wildcard, l, d.ShadowMode, d.Replaces, d.Path, d.RuleName()))
	})
	return out
}
