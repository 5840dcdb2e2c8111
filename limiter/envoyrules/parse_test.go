package envoyrules

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// mustParse parses src or fails the test.
func mustParse(t *testing.T, name, src string) *Config {
	t.Helper()
	c, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return c
}

func TestParseReadsEveryField(t *testing.T) {
	c := mustParse(t, "all.yaml", `domain: shop
descriptors:
  - key: route
    value: api/*
    shadow_mode: true
    detailed_metric: true
    value_to_metric: yes
    quota_mode: false
    share_threshold: false
    metadata:
      team: {name: checkout}
    rate_limit:
      name: api_routes
      unit: Minute
      requests_per_unit: 2147483647
      replaces:
        - name: other
        - name: another
    descriptors:
      - key: user
        rate_limit:
          unlimited: true
      - key: tier
        value: 200
        rate_limit: {unit: MONTH, requests_per_unit: 1}
`)
	if c.Domain != "shop" || len(c.Descriptors) != 1 {
		t.Fatalf("got domain %q with %d descriptors", c.Domain, len(c.Descriptors))
	}
	d := c.Descriptors[0]
	want := Descriptor{Key: "route", Value: "api/*", Wildcard: true, ShadowMode: true,
		Replaces: []string{"other", "another"}, Path: "shop.route_api/*", Line: 3}
	if d.Key != want.Key || d.Value != want.Value || d.Wildcard != want.Wildcard || d.ShadowMode != want.ShadowMode ||
		!slices.Equal(d.Replaces, want.Replaces) || d.Path != want.Path || d.Line != want.Line {
		t.Errorf("descriptor = %+v, want %+v", *d, want)
	}
	if got, want := *d.Limit, (RateLimit{Unit: "MINUTE", RequestsPerUnit: 2147483647, Window: time.Minute, Name: "api_routes"}); got != want {
		t.Errorf("limit = %+v, want %+v", got, want)
	}
	if len(d.Descriptors) != 2 {
		t.Fatalf("got %d children, want 2", len(d.Descriptors))
	}
	user, tier := d.Descriptors[0], d.Descriptors[1]
	if got, want := *user.Limit, (RateLimit{Unlimited: true}); got != want || user.Path != "shop.route_api/*.user" || user.Wildcard {
		t.Errorf("user = %+v limit %+v, want limit %+v", *user, got, want)
	}
	if tier.Value != "200" || tier.Limit.Window != 30*24*time.Hour || tier.Limit.Unit != "MONTH" || tier.Line != 23 {
		t.Errorf("tier = %+v limit %+v", *tier, *tier.Limit)
	}
}

func TestParseScalarsAsUpstream(t *testing.T) {
	c := mustParse(t, "scalars.yaml", `domain: 2024
descriptors:
  - key: a
    value: 0x1F      # yaml.v2 keeps the text of a scalar read into a string
    shadow_mode: on  # YAML 1.1 booleans, as yaml.v2
    rate_limit: &lim
      unit: second
      requests_per_unit: 1_000
  - key: b
    value: ~         # null: no value
    rate_limit: *lim
    descriptors:     # null: no children
  - key: c
    rate_limit:      # null: no rate limit, as upstream
  - <<: {key: d, shadow_mode: true}
    shadow_mode: false
    rate_limit:
      <<: [{unit: hour, requests_per_unit: 7}, {unit: day}]
      requests_per_unit: 8
`)
	if c.Domain != "2024" {
		t.Errorf("domain = %q", c.Domain)
	}
	a, b, cc, d := c.Descriptors[0], c.Descriptors[1], c.Descriptors[2], c.Descriptors[3]
	if a.Value != "0x1F" || !a.ShadowMode || a.Limit.RequestsPerUnit != 1000 {
		t.Errorf("a = %+v limit %+v", *a, *a.Limit)
	}
	if b.Value != "" || b.Path != "2024.b" || *b.Limit != *a.Limit || b.Descriptors != nil {
		t.Errorf("b = %+v", *b)
	}
	if cc.Limit != nil {
		t.Errorf("c has limit %+v, want none", *cc.Limit)
	}
	if d.Key != "d" || d.ShadowMode || d.Limit.Unit != "HOUR" || d.Limit.RequestsPerUnit != 8 {
		t.Errorf("d = %+v limit %+v: want key d, shadow false, 8 per HOUR", *d, *d.Limit)
	}
}

// TestParseZeroDeniesAll: "requests_per_unit: 0" is accepted, as upstream,
// and marked DeniesAll; it needs a valid unit like any limit, and combines
// with a name, replaces, shadow mode and children.
func TestParseZeroDeniesAll(t *testing.T) {
	c := mustParse(t, "zero.yaml", `domain: d
descriptors:
  - key: banned
    rate_limit: {unit: minute, requests_per_unit: 0x0}
  - key: shadow
    shadow_mode: true
    rate_limit:
      name: zero
      unit: Day
      requests_per_unit: 0
      replaces: [{name: other}]
    descriptors:
      - key: sub
        rate_limit: {unit: second, requests_per_unit: 0}
  - key: one
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`)
	banned, shadow, one, free := c.Descriptors[0], c.Descriptors[1], c.Descriptors[2], c.Descriptors[3]
	if got, want := *banned.Limit, (RateLimit{Unit: "MINUTE", Window: time.Minute}); got != want || !banned.Limit.DeniesAll() {
		t.Errorf("banned limit = %+v (DeniesAll %v), want %+v denying all", got, banned.Limit.DeniesAll(), want)
	}
	if l := shadow.Limit; !l.DeniesAll() || l.Name != "zero" || l.Window != 24*time.Hour || !shadow.ShadowMode || !slices.Equal(shadow.Replaces, []string{"other"}) {
		t.Errorf("shadow = %+v limit %+v", *shadow, *l)
	}
	if d := c.Match(ents("shadow", "x", "sub", "y")); d == nil || !d.Limit.DeniesAll() || d.Path != "d.shadow.sub" {
		t.Errorf("Match(shadow, sub) = %s, want d.shadow.sub denying all", summary(d))
	}
	if one.Limit.DeniesAll() || free.Limit.DeniesAll() {
		t.Errorf("DeniesAll: 1/SECOND %v, unlimited %v; want false for both", one.Limit.DeniesAll(), free.Limit.DeniesAll())
	}
	var none *RateLimit
	if none.DeniesAll() || (&RateLimit{Unlimited: true}).DeniesAll() || !(&RateLimit{Unit: "SECOND", Window: time.Second}).DeniesAll() {
		t.Error("DeniesAll is wrong for a nil, an unlimited or a hand-built zero limit")
	}
	// Such nodes are never counted, but still get unique valid names.
	names := checkNames(t, "zero.yaml", c)
	if names["zero"] != shadow || names["d.banned"] != banned || names["d.shadow.sub"] == nil {
		t.Errorf("rule names = %v", names)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "domain: d\ndescriptors:\n" // lines 1-2
	tests := []struct {
		name, src string
		want      []string // "line: text" each; the error must hold every one
	}{
		{"empty", "", []string{`f.yaml: the file is empty: an envoyproxy/ratelimit config needs a "domain"`}},
		{"comment only", "# nothing\n", []string{`f.yaml: the file is empty`}},
		{"not a mapping", "- a\n- b\n", []string{`1: the file must be a mapping with "domain" and "descriptors", got a list`}},
		{"bad yaml", "domain: [\n", []string{`invalid YAML`}},
		{"two documents", "domain: a\n---\ndomain: b\n", []string{`3: a config file holds one YAML document, found a second`}},
		{"missing domain", "descriptors: []\n", []string{`1: field "domain": missing`}},
		{"empty domain", "domain: ''\n", []string{`1: field "domain": must not be empty`}},
		{"domain a list", "domain: [a]\n", []string{`1: field "domain": must be text, got a list`}},
		{"unknown top field", "domain: d\nrules: []\n", []string{`2: field "rules": unknown field (upstream: unknown key 'rules')`}},
		{"misplaced at top", "domain: d\nunit: second\n", []string{`2: field "unit": not allowed here: it belongs in a rate_limit block`}},
		{"non-text key", "0.25: d\ndomain: d\n", []string{`1: field 0.25: field names must be text`}},
		{"duplicate field", "domain: a\ndomain: b\n", []string{`2: field "domain": given twice (first at line 1)`}},
		{"descriptors not a list", "domain: d\ndescriptors: {key: a}\n", []string{`2: field "descriptors": must be a list of descriptors, got a mapping`}},
		{"item not a mapping", head + "  - a\n", []string{`3: field "descriptors": item 0 must be a mapping with a "key", got "a"`}},
		{"missing key", head + "  - value: v\n", []string{`3: descriptor "d.descriptors[0]": field "key": missing`}},
		{"empty key", head + "  - key: ''\n", []string{`3: descriptor "d.descriptors[0]": field "key": must not be empty`}},
		{"value a mapping", head + "  - key: k\n    value: {a: 1}\n", []string{`4: descriptor "d.descriptors[0]": field "value": must be text, got a mapping`}},
		{"unknown descriptor field", head + "  - key: k\n    ratelimit: {}\n", []string{`4: descriptor "d.k": field "ratelimit": unknown field`}},
		{"misplaced in descriptor", head + "  - key: k\n    requests_per_unit: 5\n", []string{`4: descriptor "d.k": field "requests_per_unit": not allowed here: it belongs in a rate_limit block (upstream would silently ignore it here)`}},
		{"misplaced in rate_limit", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      shadow_mode: true\n",
			[]string{`7: descriptor "d.k": field "rate_limit.shadow_mode": not allowed here: it belongs in a descriptor`}},
		{"duplicate composite", head + "  - key: k\n    value: v\n  - key: k\n    value: v\n",
			[]string{`5: descriptor "d.k_v": duplicate descriptor composite key "k_v": the descriptor at line 3 has it already`}},
		{"duplicate composite across key and value", head + "  - key: a_b\n  - key: a\n    value: b\n",
			[]string{`4: descriptor "d.a_b": duplicate descriptor composite key "a_b": the descriptor at line 3`}},
		{"duplicate nested", head + "  - key: k\n    descriptors:\n      - key: s\n      - key: s\n",
			[]string{`6: descriptor "d.k.s": duplicate descriptor composite key "s"`}},
		{"rate_limit a list", head + "  - key: k\n    rate_limit: [1]\n", []string{`4: descriptor "d.k": field "rate_limit": must be a mapping`}},
		{"unit missing", head + "  - key: k\n    rate_limit:\n      requests_per_unit: 1\n", []string{`4: descriptor "d.k": field "rate_limit.unit": missing: must be one of second, minute, hour, day, week or month`}},
		{"unit invalid", head + "  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 1\n", []string{`5: descriptor "d.k": field "rate_limit.unit": invalid rate limit unit "foo"`}},
		{"unit unknown enum", head + "  - key: k\n    rate_limit:\n      unit: unknown\n      requests_per_unit: 1\n", []string{`5: descriptor "d.k": field "rate_limit.unit": invalid rate limit unit "unknown"`}},
		{"unit year", head + "  - key: k\n    rate_limit:\n      unit: year\n      requests_per_unit: 1\n", []string{`5: descriptor "d.k": field "rate_limit.unit": "year" (8760h) is longer than limiterd's longest window, 720h`}},
		{"rpu missing", head + "  - key: k\n    rate_limit:\n      unit: second\n", []string{`4: descriptor "d.k": field "rate_limit.requests_per_unit": missing: must be an integer between 0 and 2147483647 (upstream reads a missing requests_per_unit as 0 and denies every request; write "requests_per_unit: 0" if that is meant)`}},
		{"rpu null", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit:\n", []string{`4: descriptor "d.k": field "rate_limit.requests_per_unit": missing: must be an integer between 0 and 2147483647 (upstream reads a missing requests_per_unit as 0 and denies every request; write "requests_per_unit: 0" if that is meant)`}},
		{"rpu zero without unit", head + "  - key: k\n    rate_limit:\n      requests_per_unit: 0\n", []string{`4: descriptor "d.k": field "rate_limit.unit": missing: must be one of second, minute, hour, day, week or month`}},
		{"rpu too big", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 2147483648\n", []string{`6: descriptor "d.k": field "rate_limit.requests_per_unit": must be an integer between 0 and 2147483647, got 2147483648`}},
		{"rpu negative", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n", []string{`6: descriptor "d.k": field "rate_limit.requests_per_unit": must be an integer between 0 and 2147483647, got -1`}},
		{"rpu float", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1.5\n", []string{`got 1.5`}},
		{"rpu text", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: \"5\"\n", []string{`6: descriptor "d.k": field "rate_limit.requests_per_unit": must be an integer between 0 and 2147483647, got "5"`}},
		{"unlimited with unit", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      unit: day\n", []string{`6: descriptor "d.k": field "rate_limit.unit": must not be given when "rate_limit.unlimited" is true (upstream: should not specify rate limit unit when unlimited)`}},
		{"unlimited with invalid unit", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      unit: foo\n", []string{`6: descriptor "d.k": field "rate_limit.unit": must not be given when "rate_limit.unlimited" is true`}},
		{"unlimited with rpu", head + "  - key: k\n    rate_limit:\n      unlimited: true\n      requests_per_unit: 5\n", []string{`6: descriptor "d.k": field "rate_limit.requests_per_unit": must not be given when "rate_limit.unlimited" is true`}},
		{"unlimited not bool", head + "  - key: k\n    rate_limit:\n      unlimited: \"true\"\n", []string{`5: descriptor "d.k": field "rate_limit.unlimited": must be true or false, got "true"`}},
		{"shadow_mode not bool", head + "  - key: k\n    shadow_mode: 1\n", []string{`4: descriptor "d.k": field "shadow_mode": must be true or false, got 1`}},
		{"name a list", head + "  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: [x]}\n", []string{`4: descriptor "d.k": field "rate_limit.name": must be text, got a list`}},
		{"replaces not a list", head + "  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: x}\n", []string{`4: descriptor "d.k": field "rate_limit.replaces": must be a list`}},
		{"replaces item not a mapping", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [x]\n", []string{`7: descriptor "d.k": field "rate_limit.replaces[0]": must be a mapping with a "name", got "x"`}},
		{"replaces empty", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name:\n", []string{`8: descriptor "d.k": field "rate_limit.replaces[0].name": must name a limit (upstream: should not have an empty replaces entry)`}},
		{"replaces self", head + "  - key: k\n    rate_limit:\n      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: me\n", []string{`9: descriptor "d.k": field "rate_limit.replaces[0].name": "me" is this limit's own name`}},
		{"replaces unknown field", head + "  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: x\n          key: y\n", []string{`9: descriptor "d.k": field "rate_limit.replaces[0].key": not allowed here: it belongs in a descriptor`}},
		{"quota_mode", head + "  - key: k\n    quota_mode: true\n", []string{`4: descriptor "d.k": field "quota_mode": not supported by limiterd`}},
		{"share_threshold", head + "  - key: k\n    value: v*\n    share_threshold: true\n", []string{`5: descriptor "d.k_v*": field "share_threshold": not supported by limiterd`}},
		{"metadata a list", head + "  - key: k\n    metadata: [a]\n", []string{`4: descriptor "d.k": field "metadata": must be a mapping, got a list`}},
		{"merge of a scalar", head + "  - key: k\n    <<: x\n", []string{`4: descriptor "d.k": field "<<": a merge key takes a mapping or a list of mappings, got "x"`}},
		{"self-containing alias", "domain: d\ndescriptors: &l\n  - key: k\n    descriptors: *l\n", []string{`3: descriptor "d.k": field "descriptors": item 0 is an alias of a descriptor that contains it`}},
		{"too deep", "domain: d\ndescriptors:" + strings.Repeat(" [{key: k, descriptors:", 70) + strings.Repeat("}]", 70) + "\n", []string{`descriptors nest more than 64 levels deep`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("f.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				want := w
				if w[0] >= '0' && w[0] <= '9' {
					want = "f.yaml:" + w
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
				}
			}
		})
	}
	// The empty file message names the source, or "config" without one.
	if _, err := Parse("", nil); err == nil || !strings.Contains(err.Error(), "config: the file is empty") {
		t.Errorf("Parse(\"\", nil) = %v", err)
	}
}

// TestParseReportsEveryProblem checks that one run lists all problems, in
// line order, each with its line.
func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse("many.yaml", []byte(`domain: d
descriptors:
  - key: a
    rate_limit:
      unit: fortnight
      requests_per_unit: -3
  - value: orphan
  - key: a
  - key: b
    typo: 1
`))
	if err == nil {
		t.Fatal("accepted")
	}
	want := []string{
		`many.yaml:5: descriptor "d.a": field "rate_limit.unit": invalid rate limit unit "fortnight"`,
		`many.yaml:6: descriptor "d.a": field "rate_limit.requests_per_unit": must be an integer between 0 and 2147483647, got -3`,
		`many.yaml:7: descriptor "d.descriptors[1]": field "key": missing`,
		`many.yaml:8: descriptor "d.a": duplicate descriptor composite key "a": the descriptor at line 3 has it already`,
		`many.yaml:10: descriptor "d.b": field "typo": unknown field`,
	}
	msg := err.Error()
	if !strings.Contains(msg, "5 problems:") {
		t.Errorf("error does not count 5 problems:\n%s", msg)
	}
	last := -1
	for _, w := range want {
		i := strings.Index(msg, w)
		if i < 0 {
			t.Errorf("error\n%s\ndoes not contain\n%s", msg, w)
			continue
		}
		if i < last {
			t.Errorf("%q is out of line order", w)
		}
		last = i
	}
}

// TestUpstreamErrorFiles parses upstream's invalid test configs
// (test/config/*.yaml; TestEmptyDomain and friends in config_test.go). Each
// file starts with one comment line, so lines are upstream's plus one.
func TestUpstreamErrorFiles(t *testing.T) {
	tests := map[string]string{
		"bad_limit_unit.yaml":      `:7: descriptor "test-domain.key1_value1": field "rate_limit.unit": invalid rate limit unit "foo"`,
		"bad_yaml.yaml":            `invalid YAML: found unexpected end of stream`,
		"duplicate_key.yaml":       `:7: descriptor "test-domain.key1_value1": duplicate descriptor composite key "key1_value1": the descriptor at line 4`,
		"empty_domain.yaml":        `:2: field "domain": missing (upstream: config file cannot have empty domain)`,
		"empty_key.yaml":           `:4: descriptor "test-domain.descriptors[0]": field "key": missing (upstream: descriptor has empty key)`,
		"misspelled_key.yaml":      `:6: descriptor "test-domain.key1_value1": field "ratelimit": unknown field (upstream: unknown key 'ratelimit')`,
		"misspelled_key2.yaml":     `:8: descriptor "test-domain.key1_value1": field "rate_limit.requestsperunit": unknown field (upstream: unknown key 'requestsperunit')`,
		"non_map_list.yaml":        `:4: field "descriptors": item 0 must be a mapping with a "key", got "a"`,
		"non_string_key.yaml":      `:2: field 0.25: field names must be text (upstream: key is not of type string)`,
		"replaces_empty.yaml":      `:11: descriptor "test-domain.key1_value1.subkey1": field "rate_limit.replaces[0].name": must name a limit (upstream: should not have an empty replaces entry)`,
		"replaces_self.yaml":       `:11: descriptor "test-domain.key1_value1.subkey1": field "rate_limit.replaces[0].name": "self" is this limit's own name (upstream: replaces should not contain name of same descriptor)`,
		"unlimited_with_unit.yaml": `:7: descriptor "test-domain.foo": field "rate_limit.unit": must not be given when "rate_limit.unlimited" is true`,
		"share_threshold.yaml":     `:7: descriptor "test-domain.files_files/*": field "share_threshold": not supported by limiterd`,
	}
	for file, want := range tests {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("testdata", "upstream", file)
			_, err := Load(path)
			if err == nil {
				t.Fatal("accepted")
			}
			if want[0] == ':' {
				want = path + want
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
				t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
			}
		})
	}
}

func TestIsEnvoyConfig(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"domain: d\n", true},
		{"---\ndescriptors: []\ndomain: d\n", true},
		{"domain:\n", true},
		{"rules:\n  - name: default\n    limit: 1\n    window: 1s\n", false},
		{"", false},
		{"- domain\n", false},
		{"domain: [\n", false},
		{"\"domain\": d\n", true},
		{"? [domain]\n: d\n", false},
	}
	for _, tt := range tests {
		if got := IsEnvoyConfig([]byte(tt.src)); got != tt.want {
			t.Errorf("IsEnvoyConfig(%q) = %v, want %v", tt.src, got, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "readme", "example1.yaml"))
	if err != nil || c.Domain != "mongo_cps" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Load(missing) = %v, want a not-exist error that is not ErrInvalidConfig", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: d\nfoo: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), bad+":2: ") {
		t.Errorf("Load(bad) = %v, want it to name %s:2", err, bad)
	}
}

// TestAliasBomb: aliases nested 7 deep stand for 10^7 descriptors; Parse
// refuses the file quickly instead of expanding them.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for lvl := range 7 {
		fmt.Fprintf(&b, "  - key: l%d\n    descriptors: &l%d\n", lvl, lvl)
		for i := range 10 {
			if lvl == 0 {
				fmt.Fprintf(&b, "      - {key: k%d, rate_limit: {unit: second, requests_per_unit: 1}}\n", i)
			} else {
				fmt.Fprintf(&b, "      - {key: k%d, descriptors: *l%d}\n", i, lvl-1)
			}
		}
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "the file is too large once aliases are expanded") {
		t.Errorf("Parse = %v, want it refused as too large", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Parse took %v", d)
	}
	// The same reuse on a small scale is fine.
	c := mustParse(t, "reuse.yaml", "domain: d\ndescriptors:\n  - key: a\n    descriptors: &l\n      - {key: x, rate_limit: {unit: second, requests_per_unit: 1}}\n  - key: b\n    descriptors: *l\n")
	if got := summary(c.Match(ents("b", "1", "x", "2"))); got != "d.b.x 1/SECOND" {
		t.Errorf("aliased list: Match = %s", got)
	}
}

func TestProblemCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for range 150 {
		b.WriteString("  - value: x\n")
	}
	_, err := Parse("big.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "150 problems:") || !strings.Contains(err.Error(), "... and 50 more") {
		t.Errorf("error does not count 150 problems and show 100:\n%.300v", err)
	}
}

func TestParseDomainOnly(t *testing.T) {
	// Upstream accepts a domain without descriptors (test/config/duplicate_domain.yaml).
	for _, src := range []string{"domain: d\n", "domain: d\ndescriptors:\n", "domain: d\ndescriptors: []\n"} {
		c := mustParse(t, "only.yaml", src)
		if c.Domain != "d" || len(c.Descriptors) != 0 || c.Match(ents("k", "v")) != nil {
			t.Errorf("Parse(%q) = %+v", src, c)
		}
	}
}
