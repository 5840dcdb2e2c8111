package envoyrules

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// validRuleName is limiterd's rule-name rule, written independently of
// validName (limiter/validate.go checkName).
var validRuleName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// checkNames fails unless every node of c has a valid name no other has.
func checkNames(t *testing.T, what string, c *Config) map[string]*Descriptor {
	t.Helper()
	byName := map[string]*Descriptor{}
	walkPaths(c.Descriptors, nil, func(_ []Entry, d *Descriptor) {
		n := d.RuleName()
		if !validRuleName.MatchString(n) {
			t.Errorf("%s: %s: RuleName %q is not a valid limiterd rule name", what, d.Path, n)
		}
		if prev, dup := byName[n]; dup {
			t.Errorf("%s: RuleName %q is shared by %s (line %d) and %s (line %d)", what, n, prev.Path, prev.Line, d.Path, d.Line)
		}
		byName[n] = d
	})
	return byName
}

func TestRuleNamesUniqueInTestConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if c, err := Load(f); err == nil {
			checkNames(t, f, c)
			n++
		}
	}
	if n < 15 {
		t.Errorf("only %d configs checked", n)
	}
}

func TestRuleNames(t *testing.T) {
	long := strings.Repeat("x", 200)
	c := mustParse(t, "names.yaml", `domain: d
descriptors:
  - key: plain
    rate_limit: {unit: second, requests_per_unit: 1, name: my_limit}
  - key: shared1
    rate_limit: {unit: second, requests_per_unit: 1, name: same}
  - key: shared2
    rate_limit: {unit: second, requests_per_unit: 1, name: same}
  - key: badname
    rate_limit: {unit: second, requests_per_unit: 1, name: "has space"}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: path
    value: /api/?
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a.b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: `+long+`
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: d.plain
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	byName := checkNames(t, "names.yaml", c)
	get := func(path string) string {
		t.Helper()
		for n, d := range byName {
			if d.Path == path {
				return n
			}
		}
		t.Fatalf("no node %s", path)
		return ""
	}
	if n := get("d.plain"); n != "my_limit" {
		t.Errorf("a valid, unshared rate_limit name is used: got %q", n)
	}
	s1, s2 := get("d.shared1"), get("d.shared2")
	if !strings.HasPrefix(s1, "same-") || !strings.HasPrefix(s2, "same-") || len(s1) != len("same-")+8 {
		t.Errorf("a shared name gets a hash suffix on every node: got %q, %q", s1, s2)
	}
	if n := get("d.badname"); n != "d.badname" {
		t.Errorf("an invalid rate_limit name falls back to the path: got %q", n)
	}
	p1, p2 := get("d.path_/api/*"), get("d.path_/api/?")
	if !strings.HasPrefix(p1, "d.path__api__-") || !strings.HasPrefix(p2, "d.path__api__-") || p1 == p2 {
		t.Errorf("sanitised paths get distinct hash suffixes: got %q, %q", p1, p2)
	}
	ab1, ab2 := get("d.a.b"), "" // two nodes have the path "d.a.b"
	for n, d := range byName {
		if d.Path == "d.a.b" && n != ab1 {
			ab2 = n
		}
	}
	if ab2 == "" || !strings.HasPrefix(ab1, "d.a.b-") || !strings.HasPrefix(ab2, "d.a.b-") {
		t.Errorf("two nodes with one path get distinct suffixed names: got %q, %q", ab1, ab2)
	}
	if n := get("d." + long); len(n) != 128 || !strings.HasPrefix(n, "d.xxx") {
		t.Errorf("a long path is cut to 128 bytes with a suffix: got %q (%d bytes)", n, len(n))
	}
	if n := get("d.d.plain"); n != "d.d.plain" {
		t.Errorf("a valid path is used as it is: got %q", n)
	}
	if n := get("d.a"); n != "d.a" {
		t.Errorf("a node without limit is named by its path: got %q", n)
	}

	// Names depend on the file only.
	again := mustParse(t, "names.yaml", `domain: d
descriptors:
  - key: shared1
    rate_limit: {unit: second, requests_per_unit: 1, name: same}
`)
	if a, b := again.Descriptors[0].RuleName(), c.Descriptors[1].RuleName(); a != "same" || b == a {
		t.Errorf("unshared name = %q, shared = %q", a, b)
	}
	hand := &Descriptor{Key: "k", Value: "a b", Path: "d.k_a b"}
	if n := hand.RuleName(); !validRuleName.MatchString(n) || !strings.HasPrefix(n, "d.k_a_b-") {
		t.Errorf("hand-built RuleName = %q", n)
	}
}

// TestRuleNamesSuffixCollision covers the last resort: a user name equal to
// the suffixed name another node gets.
func TestRuleNamesSuffixCollision(t *testing.T) {
	taken := "x-" + shortHash(CountKey("d", ents("k1", "")))
	c := mustParse(t, "c.yaml", `domain: d
descriptors:
  - key: k1
    rate_limit: {unit: second, requests_per_unit: 1, name: x}
  - key: k2
    rate_limit: {unit: second, requests_per_unit: 1, name: x}
  - key: k3
    rate_limit: {unit: second, requests_per_unit: 1, name: `+taken+`}
`)
	byName := checkNames(t, "c.yaml", c)
	if d := byName[taken]; d == nil || d.Key != "k1" {
		t.Errorf("%q should name k1, got %v", taken, d)
	}
	if n := c.Descriptors[2].RuleName(); !strings.HasPrefix(n, taken+"-") || !strings.HasSuffix(n, "-2") {
		t.Errorf("k3 = %q, want %s-<hash>-2", n, taken)
	}
}
