package limiter

import (
	"github.com/limiterd/limiterd/internal/yamlnode"

	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
	"github.com/limiterd/limiterd/limiter/internal/problems"
)

// DefaultSlices is the number of slices a limit's window is divided into
// when the rule file does not say (HS7: 12 slices of 5 s for 60 s). A window
// shorter than DefaultSlices milliseconds gets one slice per millisecond.
const DefaultSlices = 12

// maxNameLen bounds a rule name: names are echoed in every response header,
// so a runaway name would bloat every response.
const maxNameLen = 128

// maxProblems bounds how many problems one error lists; a file that is wrong
// in hundreds of places needs its first few fixed, not a wall of text.
const maxProblems = 20

// Validate reports whether rs is a rule set the Limiter can enforce: the
// same checks Parse makes, for a RuleSet built in code, and for Envoy
// configs: each one non-nil, with a domain, and no two with the same
// domain. Every problem found is listed; the error wraps ErrInvalidRules.
// Positions come from Rule.Line, and name the file of each rule in a set
// built by Merge.
func (rs *RuleSet) Validate() error {
	if rs == nil {
		return fmt.Errorf("%w: nil rule set", ErrInvalidRules)
	}
	errs := newProblems(rs.Source)
	if len(rs.Rules) == 0 && len(rs.Envoy) == 0 {
		errs.Add(0, "no rules")
	}
	ruleAt, envoyAt := rs.origins()
	refs := make([]ruleRef, len(rs.Rules))
	for i := range rs.Rules {
		r := &rs.Rules[i]
		o := ruleAt[i]
		add := func(format string, args ...any) { errs.AddIn(o.source, o.rank, r.Line, format, args...) }
		label := fmt.Sprintf("rules[%d]", o.index)
		ref := ruleRef{line: r.Line, nameLine: r.Line, matchLine: r.Line, label: label, source: o.source, rank: o.rank, index: o.index, byName: r.ByName}
		if msg := checkRuleName(r.Name); msg != "" {
			add("%s: field \"name\": %s", label, msg)
		} else {
			ref.name, ref.nameOK = r.Name, true
			label = fmt.Sprintf("rule %q", r.Name)
			ref.label = label
		}
		switch {
		case r.Match != "" && r.ByName:
			add("%s: field \"match\": a ByName rule decides only requests that name it, so it takes no pattern", label)
		case r.Match != "":
			ref.hasMatch = true
			if msg := checkPattern(r.Match); msg != "" {
				add("%s: field \"match\": %s", label, msg)
			} else {
				ref.matchOK, ref.canon = true, compilePattern(r.Match).canonical()
				ref.match = r.Match
			}
		}
		refs[i] = ref
		switch n := len(r.Limits); {
		case n == 0:
			add("%s: no limits", label)
			continue
		case n > counter.MaxLimitsPerCall:
			add("%s: field \"limits\": %s", label, checkLimitCount(n))
		}
		for j, s := range r.Limits {
			where := label
			if len(r.Limits) > 1 {
				where = fmt.Sprintf("%s: limits[%d]", label, j)
			}
			if msg := checkLimit(s.Limit); msg != "" {
				add("%s: field \"limit\": %s", where, msg)
			}
			if msg := checkWindow(s.Window, ""); msg != "" {
				add("%s: field \"window\": %s", where, msg)
				continue
			}
			if msg := checkSlices(int64(s.Slices), s.Window); msg != "" {
				add("%s: field \"slices\": %s", where, msg)
			}
			for k := range j {
				if r.Limits[k].Window == s.Window {
					add("%s: field \"window\": %s", where, repeatsWindow(s.Window, k))
				}
			}
			if ref.nameOK {
				if want := policyName(r.Name, len(r.Limits), s.Window); s.Policy != want {
					add("%s: Policy must be %q, got %q", where, want, s.Policy)
				}
			}
		}
	}
	crossCheck(refs, &errs)
	checkEnvoyConfigs(rs.Envoy, envoyAt, &errs)
	return errs.Err()
}

// checkEnvoyConfigs checks the Envoy configs of a rule set: each one there,
// with a domain, and one per domain, which upstream requires of the files it
// loads too (unless MERGE_DOMAIN_CONFIG merges them): Limiter.Envoy finds a
// config by its domain.
func checkEnvoyConfigs(cs []*envoyrules.Config, at []origin, errs *problems.List) {
	domains := make(map[string]int, len(cs))
	for i, c := range cs {
		o := at[i]
		switch {
		case c == nil:
			errs.AddIn(o.source, o.rank, 0, "envoy[%d]: no Envoy config (nil)", o.index)
		case c.Domain == "":
			errs.AddIn(o.source, o.rank, 0, "envoy[%d]: the Envoy config has no domain", o.index)
		default:
			j, dup := domains[c.Domain]
			if !dup {
				domains[c.Domain] = i
				break
			}
			other := at[j].source
			if other == o.source {
				other = fmt.Sprintf("envoy[%d] of the same file", at[j].index)
			}
			errs.AddIn(o.source, o.rank, 0, "Envoy domain %q: already the domain of %s; give each domain one file", yamlnode.Truncate(c.Domain), other)
		}
	}
}

// origin is where a rule or an Envoy config of a RuleSet came from: its
// file, the file's position among the merged ones (to order messages), and
// its index in the file's own list.
type origin struct {
	source      string
	rank, index int
}

// origins returns the origin of every rule and every Envoy config of rs.
func (rs *RuleSet) origins() (rules, envoy []origin) {
	rules, envoy = make([]origin, len(rs.Rules)), make([]origin, len(rs.Envoy))
	files, ok := rs.spans()
	if !ok {
		for i := range rules {
			rules[i] = origin{source: rs.Source, index: i}
		}
		for i := range envoy {
			envoy[i] = origin{source: rs.Source, index: i}
		}
		return rules, envoy
	}
	nr, ne := 0, 0
	for rank, f := range files {
		for i := range f.rules {
			rules[nr+i] = origin{f.source, rank, i}
		}
		for i := range f.envoy {
			envoy[ne+i] = origin{f.source, rank, i}
		}
		nr, ne = nr+f.rules, ne+f.envoy
	}
	return rules, envoy
}

// ruleRef is what the checks across rules need to know about one rule.
type ruleRef struct {
	label             string // how messages name the rule
	source            string // its file, "" for the one being parsed
	rank              int    // the file's position among merged ones
	index             int    // its position in its file's rules
	line              int
	name              string
	nameOK            bool
	nameLine          int
	match, canon      string // canon: the pattern in canonical form
	hasMatch, matchOK bool
	matchLine         int
	byName            bool
}

// at names the position of rule o for a message about r: "line N" in r's
// own file, "file:N" in another.
func (r ruleRef) at(o ruleRef) string {
	if o.source == r.source || o.source == "" {
		return fmt.Sprintf("line %d", o.line)
	}
	if o.line == 0 {
		return o.source
	}
	return o.source + ":" + strconv.Itoa(o.line)
}

// crossCheck reports what no single rule shows: duplicate names, a second
// default rule, and a pattern that repeats an earlier one (the later rule
// could then never be chosen by matching, which is always a mistake).
// ByName rules take part in the first check only.
func crossCheck(refs []ruleRef, errs *problems.List) {
	names := make(map[string]int, len(refs))
	patterns := make(map[string]int, len(refs))
	def := -1
	for i, r := range refs {
		if r.nameOK {
			if j, dup := names[r.name]; dup {
				errs.AddIn(r.source, r.rank, r.nameLine, "rules[%d]: field \"name\": %q is already the name of the rule at %s", r.index, r.name, r.at(refs[j]))
			} else {
				names[r.name] = i
			}
		}
		switch {
		case r.byName:
		case !r.hasMatch && def >= 0:
			errs.AddIn(r.source, r.rank, r.line, "%s: only one rule may omit \"match\" (the default rule), and %s at %s already does", r.label, refs[def].label, r.at(refs[def]))
		case !r.hasMatch:
			def = i
		case r.matchOK:
			if j, dup := patterns[r.canon]; dup {
				errs.AddIn(r.source, r.rank, r.matchLine, "%s: field \"match\": %q is the same pattern as %s at %s, so this rule could never match", r.label, r.match, refs[j].label, r.at(refs[j]))
			} else {
				patterns[r.canon] = i
			}
		}
	}
}

// policyName is the RateLimit-Policy name of a limit: the rule name when the
// rule has one limit, "<rule>/<window>" otherwise.
func policyName(rule string, limits int, window time.Duration) string {
	if limits == 1 {
		return rule
	}
	return rule + "/" + formatWindow(window)
}

// formatWindow writes a window as whole seconds ("60s") when it is one, else
// as milliseconds ("500ms"): short, unambiguous and free of the "1m0s" forms
// of time.Duration.String, since it ends up in headers.
func formatWindow(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// The check functions return "" for a valid value, else the complaint, worded
// to follow `field "x": `. Parse and Validate share them so they agree.

// checkRuleName is checkName for a rule's name, which may not be the name
// reserved for limit overrides.
func checkRuleName(s string) string {
	if s == OverrideRule {
		return fmt.Sprintf("%q is reserved for limit overrides (Request.Limit)", OverrideRule)
	}
	return checkName(s)
}

func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("must be at most %d characters, got %d", maxNameLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return fmt.Sprintf("must contain only ASCII letters, digits and \"-_.:\", got %q", s)
		}
	}
	return ""
}

// nameByte reports whether c may appear in a rule name. The set keeps a name
// valid as an HTTP structured-field string and free of "/", which separates
// the rule from the window in multi-limit policy names.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':'
}

func checkPattern(p string) string {
	switch {
	case p == "":
		return "must not be empty (omit match for the default rule)"
	case !utf8.ValidString(p):
		return "must be valid UTF-8"
	}
	// A backslash escapes the next character; a lone one at the end escapes
	// nothing, which is a typo rather than a literal backslash ("\\").
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' {
			if i == len(p)-1 {
				return `ends in a lone "\" (write "\\" for a literal backslash)`
			}
			i++
		}
	}
	return ""
}

func checkLimit(v int64) string {
	if v < 1 || v > counter.MaxLimit {
		return intRange(1, counter.MaxLimit, strconv.FormatInt(v, 10))
	}
	return ""
}

func intRange(lo, hi int64, got string) string {
	return fmt.Sprintf("must be an integer between %d and %d, got %s", lo, hi, got)
}

// checkWindow checks a window; text is how the file wrote it, quoted back
// in the message ("" to use d.String()).
func checkWindow(d time.Duration, text string) string {
	if text == "" {
		text = d.String()
	}
	switch {
	case d%time.Millisecond != 0:
		return fmt.Sprintf("must be a whole number of milliseconds, got %s", text)
	case d < time.Millisecond || d > counter.MaxWindow:
		return fmt.Sprintf("must be between 1ms and %s, got %s", formatMaxWindow(), text)
	}
	return ""
}

// formatMaxWindow names counter.MaxWindow in hours, as a user would write it.
func formatMaxWindow() string {
	return strconv.FormatInt(int64(counter.MaxWindow/time.Hour), 10) + "h"
}

// checkSlices checks a slice count against a valid window.
func checkSlices(n int64, window time.Duration) string {
	switch {
	case n < 1 || n > counter.MaxSlices:
		return intRange(1, counter.MaxSlices, strconv.FormatInt(n, 10))
	case int64(window/time.Millisecond) < n:
		return fmt.Sprintf("must leave every slice at least 1ms, but window %v has %d slices", window, n)
	}
	return ""
}

func checkLimitCount(n int) string {
	return fmt.Sprintf("must list between 1 and %d limits, got %d", counter.MaxLimitsPerCall, n)
}

func repeatsWindow(w time.Duration, k int) string {
	return fmt.Sprintf("%v repeats the window of limits[%d]; every limit of a rule needs its own window", w, k)
}

// defaultSlices is the slice count of a window whose rule does not give one.
func defaultSlices(window time.Duration) int {
	return int(min(DefaultSlices, int64(window/time.Millisecond)))
}

// newProblems is the collector of the problems of the rule file source.
func newProblems(source string) problems.List {
	return problems.List{Source: source, Unnamed: "rules", Sentinel: ErrInvalidRules, Shown: maxProblems}
}
