package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter/envoyrules"
)

const mergeYAML = `rules:
  - name: premium
    match: "premium:*"
    limit: 6000
    window: 60s
  - name: default
    limit: 600
    window: 60s
`

func TestMergeRulesAndEnvoy(t *testing.T) {
	ours := mustParseAs(t, "rules.yaml", mergeYAML)
	env, err := Load(envoyFile("readme/example1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Merge(ours, env)
	if err != nil {
		t.Fatal(err)
	}
	if want := "rules.yaml, " + env.Source; rs.Source != want {
		t.Errorf("Source = %q, want %q", rs.Source, want)
	}
	var names []string
	for _, r := range rs.Rules {
		names = append(names, r.Name)
	}
	want := "premium default envoy:mongo_cps:mongo_cps.database_users envoy:mongo_cps:mongo_cps.database_default"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("rules %s, want %s", got, want)
	}
	if len(rs.Envoy) != 1 || rs.Envoy[0] != env.Envoy[0] {
		t.Errorf("Envoy = %v, want the Envoy file's config", rs.Envoy)
	}
	if len(ours.Rules) != 2 || len(env.Rules) != 2 {
		t.Error("Merge changed its inputs")
	}
	l, err := New(newCounter(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ key, rule, want string }{
		{"premium:acme", "", "premium"},
		{"anyone", "", "default"},
		// An Envoy count key matches no pattern: the default rule has it.
		{envoyrules.CountKey("mongo_cps", []envoyrules.Entry{{Key: "database", Value: "users"}}), "", "default"},
		{"mongo_cps|database=users", "envoy:mongo_cps:mongo_cps.database_users", "envoy:mongo_cps:mongo_cps.database_users"},
	} {
		var d Decision
		if err := l.Check(at(0), Request{Key: tt.key, Rule: tt.rule, Hits: 1}, &d); err != nil || d.Rule != tt.want {
			t.Errorf("Check(%q, rule %q): rule %q, %v; want %q", tt.key, tt.rule, d.Rule, err, tt.want)
		}
	}
	if l.Envoy("mongo_cps") != env.Envoy[0] {
		t.Error("Envoy(mongo_cps) is not the merged config")
	}
}

// TestMergeConflicts checks each conflict only a merge shows, with a
// message naming the file and line of both sides.
func TestMergeConflicts(t *testing.T) {
	const (
		defaultRule = "rules:\n  - name: default\n    limit: 5\n    window: 1s\n"
		fallback    = "rules:\n  - name: fallback\n    limit: 5\n    window: 1s\n"
		patternP    = "rules:\n  - name: p\n    match: \"p:*\"\n    limit: 5\n    window: 1s\n"
		patternQ    = "rules:\n  - name: other\n    match: \"q:*\"\n    limit: 5\n    window: 1s\n  - name: q\n    match: \"p:*\"\n    limit: 5\n    window: 1s\n"
		envoyA      = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 3}\n"
		envoyB      = "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 3}\n"
		ourEnvoyRul = "rules:\n  - name: \"envoy:d:d.a\"\n    match: \"x\"\n    limit: 5\n    window: 1s\n"
	)
	type file struct{ name, data string }
	tests := []struct {
		name  string
		files []file
		want  string
	}{
		{"one name in two files", []file{{"a.yaml", defaultRule}, {"b.yaml", patternP}, {"c.yaml", "rules:\n  - name: default\n    match: \"x\"\n    limit: 5\n    window: 1s\n"}},
			`c.yaml:2: rules[0]: field "name": "default" is already the name of the rule at a.yaml:2`},
		{"two default rules", []file{{"a.yaml", defaultRule}, {"b.yaml", fallback}},
			`b.yaml:2: rule "fallback": only one rule may omit "match" (the default rule), and rule "default" at a.yaml:2 already does`},
		{"a pattern of an earlier file", []file{{"a.yaml", patternP}, {"b.yaml", patternQ}},
			`b.yaml:6: rule "q": field "match": "p:*" is the same pattern as rule "p" at a.yaml:2, so this rule could never match`},
		{"two Envoy files for one domain", []file{{"a.yaml", defaultRule}, {"e1.yaml", envoyA}, {"e2.yaml", envoyB}},
			`e2.yaml: Envoy domain "d": already the domain of e1.yaml; give each domain one file`},
		{"our rule named as an Envoy one", []file{{"e1.yaml", envoyA}, {"a.yaml", ourEnvoyRul}},
			`a.yaml:2: rules[0]: field "name": "envoy:d:d.a" is already the name of the rule at e1.yaml:3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sets []*RuleSet
			for _, f := range tt.files {
				sets = append(sets, mustParseAs(t, f.name, f.data))
			}
			rs, err := Merge(sets...)
			if rs != nil || !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("Merge = %v, %v; want ErrInvalidRules", rs, err)
			}
			if want := "limiter: invalid rules: " + tt.want; err.Error() != want {
				t.Errorf("error\n  %s\nwant\n  %s", err, want)
			}
			// The same conflict found after merging in two steps.
			if len(sets) > 2 {
				first, err := Merge(sets[:len(sets)-1]...)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Merge(first, sets[len(sets)-1]); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("merged in two steps: %v, want %q", err, tt.want)
				}
			}
		})
	}
}

func TestMergeErrors(t *testing.T) {
	ok := mustParseAs(t, "a.yaml", "rules:\n  - name: default\n    limit: 5\n    window: 1s\n")
	bad := &RuleSet{Source: "code", Rules: []Rule{{Name: "x", Match: "x", Line: 7, Limits: []LimitSpec{{Policy: "x", Limit: 0, Window: time.Second, Slices: 12}}}}}
	tests := []struct {
		name string
		sets []*RuleSet
		want string
	}{
		{"nothing", nil, "no rule sets to merge"},
		{"a nil set", []*RuleSet{ok, nil}, "rule set 2 of 2 to merge is nil"},
		// A problem within one set names its file, not the merged Source.
		{"an invalid set", []*RuleSet{ok, bad}, `code:7: rule "x": field "limit": must be an integer between 1 and 2147483647, got 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := Merge(tt.sets...)
			if rs != nil || !errors.Is(err, ErrInvalidRules) || !strings.HasSuffix(err.Error(), tt.want) {
				t.Fatalf("Merge = %v, %v; want ErrInvalidRules ending %q", rs, err, tt.want)
			}
		})
	}
}

// TestValidateByName checks ByName rules in sets built in code: several
// without a pattern are fine beside a default rule, one with a pattern is
// not; and the Envoy configs of a set are checked.
func TestValidateByName(t *testing.T) {
	lim := func(name string) []LimitSpec {
		return []LimitSpec{{Policy: name, Limit: 5, Window: time.Second, Slices: 12}}
	}
	cfg := func(domain string) *envoyrules.Config { return &envoyrules.Config{Domain: domain} }
	tests := []struct {
		name string
		rs   RuleSet
		want string // "" for valid
	}{
		{"several ByName and a default", RuleSet{Rules: []Rule{
			{Name: "a", ByName: true, Limits: lim("a")},
			{Name: "b", ByName: true, Limits: lim("b")},
			{Name: "default", Limits: lim("default")},
		}}, ""},
		{"only ByName rules", RuleSet{Rules: []Rule{{Name: "a", ByName: true, Limits: lim("a")}}}, ""},
		{"only an Envoy config", RuleSet{Envoy: []*envoyrules.Config{cfg("d")}}, ""},
		{"ByName with a pattern", RuleSet{Rules: []Rule{{Name: "a", ByName: true, Match: "a:*", Limits: lim("a")}}},
			`rule "a": field "match": a ByName rule decides only requests that name it, so it takes no pattern`},
		{"two ByName with one name", RuleSet{Rules: []Rule{{Name: "a", ByName: true, Limits: lim("a")}, {Name: "a", ByName: true, Limits: lim("a")}}},
			`rules[1]: field "name": "a" is already the name of the rule at line 0`},
		{"nil config", RuleSet{Envoy: []*envoyrules.Config{nil}}, "envoy[0]: no Envoy config (nil)"},
		{"config without domain", RuleSet{Envoy: []*envoyrules.Config{{}}}, "envoy[0]: the Envoy config has no domain"},
		{"one domain twice", RuleSet{Envoy: []*envoyrules.Config{cfg("d"), cfg("d")}},
			`Envoy domain "d": already the domain of envoy[0] of the same file; give each domain one file`},
		{"nothing", RuleSet{}, "no rules"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.rs.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidRules) || !strings.HasSuffix(err.Error(), tt.want)):
				t.Fatalf("Validate: %v, want ErrInvalidRules ending %q", err, tt.want)
			}
		})
	}
}
