package limiter

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/yamlnode"
	"github.com/limiterd/limiterd/limiter/envoyrules"
	"github.com/limiterd/limiterd/limiter/internal/problems"
)

// Parse parses and validates a rule file (format in doc.go). source names
// the file in messages and becomes RuleSet.Source. Every problem found is
// reported, each as "source:line: rule "name": field "f": what is wrong",
// in one error that wraps ErrInvalidRules.
//
// An envoyproxy/ratelimit file, told apart by its top-level "domain"
// (envoyrules.IsEnvoyConfig), is read as it is: its Config goes into
// RuleSet.Envoy and each counted limit becomes a ByName rule (doc.go,
// "Envoy files"). Its errors match both ErrInvalidRules and
// envoyrules.ErrInvalidConfig.
func Parse(source string, data []byte) (*RuleSet, error) {
	if envoyrules.IsEnvoyConfig(data) {
		return parseEnvoy(source, data)
	}
	p := parser{errs: newProblems(source)}
	rs := p.file(data)
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	rs.Source = source
	// The parser checked every value where it read it, to name its line;
	// validating the result as well means the two can never disagree.
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	return rs, nil
}

// Field names, as the file spells them.
const (
	fRules  = "rules"
	fName   = "name"
	fMatch  = "match"
	fLimit  = "limit"
	fWindow = "window"
	fSlices = "slices"
	fShadow = "shadow"
	fLimits = "limits"
)

// The fields each mapping allows, as functions so no package state can be changed.
func topFields() []string { return []string{fRules} }
func ruleFields() []string {
	return []string{fName, fMatch, fLimit, fWindow, fSlices, fShadow, fLimits}
}
func limitFields() []string { return []string{fLimit, fWindow, fSlices} }

type parser struct {
	errs problems.List
}

func (p *parser) file(data []byte) *RuleSet {
	root := p.errs.Document(data, fmt.Sprintf("no rules: the file is empty (it needs a %q list)", fRules),
		"a rule file holds one YAML document, found a second")
	if root == nil {
		return nil
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = yamlnode.Deref(root.Content[0])
	}
	if yamlnode.IsNull(root) {
		p.errs.Add(0, "no rules: the file is empty (it needs a %q list)", fRules)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errs.Add(root.Line, "the file must be a mapping with a %q list, got %s", fRules, yamlnode.Describe(root))
		return nil
	}
	fields := p.fields(root, "", topFields())
	p.reportFields(fields)
	rules := fields.value[fRules]
	if rules == nil {
		p.errs.Add(root.Line, "no rules: missing the %q list", fRules)
		return nil
	}
	if yamlnode.IsNull(rules) || rules.Kind == yaml.SequenceNode && len(rules.Content) == 0 {
		p.errs.Add(rules.Line, "no rules: the %q list is empty", fRules)
		return nil
	}
	if rules.Kind != yaml.SequenceNode {
		p.errs.Add(rules.Line, "field %q: must be a list of rules, got %s", fRules, yamlnode.Describe(rules))
		return nil
	}
	rs := &RuleSet{Rules: make([]Rule, 0, len(rules.Content))}
	refs := make([]ruleRef, 0, len(rules.Content))
	for i, n := range rules.Content {
		r, ref := p.rule(i, yamlnode.Deref(n))
		rs.Rules = append(rs.Rules, r)
		refs = append(refs, ref)
	}
	crossCheck(refs, &p.errs)
	return rs
}

// rule reads rules[i].
func (p *parser) rule(i int, n *yaml.Node) (Rule, ruleRef) {
	r := Rule{Line: n.Line}
	ref := ruleRef{label: fmt.Sprintf("rules[%d]", i), line: n.Line, nameLine: n.Line, index: i}
	if n.Kind != yaml.MappingNode {
		p.errs.Add(n.Line, "%s: must be a mapping with %q and limits, got %s", ref.label, fName, yamlnode.Describe(n))
		return r, ref
	}
	// The name first: later messages call the rule by it.
	f := p.fields(n, "", ruleFields())
	switch v := f.value[fName]; {
	case v == nil:
		p.errs.Add(n.Line, "%s: field %q: missing", ref.label, fName)
	default:
		ref.nameLine = v.Line
		s, ok := p.str(v, ref.label, fName)
		if !ok {
			break
		}
		if msg := checkRuleName(s); msg != "" {
			p.errs.Add(v.Line, "%s: field %q: %s", ref.label, fName, msg)
			break
		}
		r.Name, ref.name, ref.nameOK = s, s, true
		ref.label = fmt.Sprintf("rule %q", s)
	}
	// Field messages of a rule whose name was unusable still say which one,
	// by position, so the prefix stays unambiguous.
	label := ref.label
	f.label = label
	p.reportFields(f)

	if v := f.value[fMatch]; v != nil {
		ref.hasMatch, ref.matchLine = true, v.Line
		if s, ok := p.str(v, label, fMatch); ok {
			if msg := checkPattern(s); msg != "" {
				p.errs.Add(v.Line, "%s: field %q: %s", label, fMatch, msg)
			} else {
				r.Match, ref.match, ref.matchOK = s, s, true
				ref.canon = compilePattern(s).canonical()
			}
		}
	}
	if v := f.value[fShadow]; v != nil {
		var b bool
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&b) != nil {
			p.errs.Add(v.Line, "%s: field %q: must be true or false, got %s", label, fShadow, yamlnode.Describe(v))
		}
		r.Shadow = b
	}

	single := f.value[fLimit] != nil || f.value[fWindow] != nil || f.value[fSlices] != nil
	list := f.value[fLimits]
	switch {
	case single && list != nil:
		p.errs.Add(f.key[fLimits].Line, "%s: field %q: give either limit and window or a limits list, not both", label, fLimits)
	case single:
		if s, ok := p.limitSpec(label, n, f); ok {
			r.Limits = []LimitSpec{s}
		}
	case list != nil:
		r.Limits = p.limitList(label, list)
	default:
		p.errs.Add(n.Line, "%s: missing %q and %q (or a %q list)", label, fLimit, fWindow, fLimits)
	}
	for j := range r.Limits {
		r.Limits[j].Policy = policyName(r.Name, len(r.Limits), r.Limits[j].Window)
	}
	return r, ref
}

// limitList reads a rule's "limits" list.
func (p *parser) limitList(label string, n *yaml.Node) []LimitSpec {
	if n.Kind != yaml.SequenceNode {
		p.errs.Add(n.Line, "%s: field %q: must be a list of {limit, window, slices}, got %s", label, fLimits, yamlnode.Describe(n))
		return nil
	}
	if len(n.Content) == 0 || len(n.Content) > counter.MaxLimitsPerCall {
		p.errs.Add(n.Line, "%s: field %q: %s", label, fLimits, checkLimitCount(len(n.Content)))
		return nil
	}
	specs := make([]LimitSpec, 0, len(n.Content))
	ok := true
	for j, e := range n.Content {
		e = yamlnode.Deref(e)
		where := fmt.Sprintf("%s: limits[%d]", label, j)
		if e.Kind != yaml.MappingNode {
			p.errs.Add(e.Line, "%s: must be a mapping such as {limit: 10, window: 1s}, got %s", where, yamlnode.Describe(e))
			ok = false
			continue
		}
		f := p.fields(e, where, limitFields())
		p.reportFields(f)
		s, good := p.limitSpec(where, e, f)
		if !good {
			ok = false
			continue
		}
		for k, prev := range specs {
			if prev.Window == s.Window {
				p.errs.Add(f.value[fWindow].Line, "%s: field %q: %s", where, fWindow, repeatsWindow(s.Window, k))
				ok = false
			}
		}
		specs = append(specs, s)
	}
	if !ok {
		return nil
	}
	return specs
}

// limitSpec reads limit, window and slices from f, whose mapping is n.
func (p *parser) limitSpec(where string, n *yaml.Node, f fieldSet) (LimitSpec, bool) {
	var s LimitSpec
	ok := true
	if v := f.value[fLimit]; v == nil {
		p.errs.Add(n.Line, "%s: field %q: missing", where, fLimit)
		ok = false
	} else {
		s.Limit, ok = p.integer(v, where, fLimit, 1, counter.MaxLimit)
	}
	v := f.value[fWindow]
	if v == nil {
		p.errs.Add(n.Line, "%s: field %q: missing", where, fWindow)
		return s, false
	}
	w, good := p.window(v, where)
	if !good {
		return s, false
	}
	s.Window = w
	s.Slices = defaultSlices(w)
	if v := f.value[fSlices]; v != nil {
		n, good := p.integer(v, where, fSlices, 1, counter.MaxSlices)
		if !good {
			return s, false
		}
		if msg := checkSlices(n, w); msg != "" {
			p.errs.Add(v.Line, "%s: field %q: %s", where, fSlices, msg)
			return s, false
		}
		s.Slices = int(n)
	}
	return s, ok
}

// window reads a window: a Go duration string that is a whole number of
// milliseconds in range.
func (p *parser) window(v *yaml.Node, where string) (time.Duration, bool) {
	bad := func() (time.Duration, bool) {
		p.errs.Add(v.Line, "%s: field %q: must be a Go duration such as \"60s\" or \"500ms\", got %s", where, fWindow, yamlnode.Describe(v))
		return 0, false
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return bad()
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return bad()
	}
	if msg := checkWindow(d, yamlnode.Truncate(v.Value)); msg != "" {
		p.errs.Add(v.Line, "%s: field %q: %s", where, fWindow, msg)
		return 0, false
	}
	return d, true
}

// integer reads a YAML integer in [lo, hi].
func (p *parser) integer(v *yaml.Node, where, field string, lo, hi int64) (int64, bool) {
	var n int64
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" && v.Decode(&n) == nil && lo <= n && n <= hi {
		return n, true
	}
	p.errs.Add(v.Line, "%s: field %q: %s", where, field, intRange(lo, hi, yamlnode.Describe(v)))
	return 0, false
}

// str reads a scalar as text. Any non-null scalar will do: "name: 2024" is
// the text 2024, as a user means it.
func (p *parser) str(v *yaml.Node, where, field string) (string, bool) {
	if v.Kind == yaml.ScalarNode && !yamlnode.IsNull(v) {
		return v.Value, true
	}
	if yamlnode.IsNull(v) {
		p.errs.Add(v.Line, "%s: field %q: must not be empty", where, field)
	} else {
		p.errs.Add(v.Line, "%s: field %q: must be text, got %s", where, field, yamlnode.Describe(v))
	}
	return "", false
}

// fieldSet is a mapping's fields by name, with the problems found reading it
// (unknown and repeated fields), held back until the owner's label is known.
type fieldSet struct {
	label    string
	value    map[string]*yaml.Node
	key      map[string]*yaml.Node
	problems []fieldProblem
}

type fieldProblem struct {
	line int
	msg  string
}

// fields reads mapping n, allowing only the names in known.
func (p *parser) fields(n *yaml.Node, label string, known []string) fieldSet {
	f := fieldSet{label: label, value: make(map[string]*yaml.Node), key: make(map[string]*yaml.Node)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Deref(n.Content[i]), yamlnode.Deref(n.Content[i+1])
		name := k.Value
		if k.Kind != yaml.ScalarNode {
			name = yamlnode.Describe(k)
		}
		name = yamlnode.Truncate(name)
		switch {
		case !slices.Contains(known, name) || k.Kind != yaml.ScalarNode:
			f.problems = append(f.problems, fieldProblem{k.Line, fmt.Sprintf("field %q: unknown field (known fields: %s)", name, strings.Join(known, ", "))})
		case f.key[name] != nil:
			f.problems = append(f.problems, fieldProblem{k.Line, fmt.Sprintf("field %q: given twice (first at line %d)", name, f.key[name].Line)})
		default:
			f.key[name], f.value[name] = k, v
		}
	}
	return f
}

// reportFields reports f's unknown and repeated fields under f.label.
func (p *parser) reportFields(f fieldSet) {
	for _, pr := range f.problems {
		if f.label == "" {
			p.errs.Add(pr.line, "%s", pr.msg)
		} else {
			p.errs.Add(pr.line, "%s: %s", f.label, pr.msg)
		}
	}
}
