package envoyrules

import (
	"github.com/limiterd/limiterd/internal/yamlnode"
	"github.com/limiterd/limiterd/limiter/internal/problems"

	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Field names, as the file spells them.
const (
	fDomain          = "domain"
	fDescriptors     = "descriptors"
	fKey             = "key"
	fValue           = "value"
	fRateLimit       = "rate_limit"
	fShadowMode      = "shadow_mode"
	fQuotaMode       = "quota_mode"
	fDetailedMetric  = "detailed_metric"
	fValueToMetric   = "value_to_metric"
	fShareThreshold  = "share_threshold"
	fMetadata        = "metadata"
	fUnit            = "unit"
	fRequestsPerUnit = "requests_per_unit"
	fUnlimited       = "unlimited"
	fName            = "name"
	fReplaces        = "replaces"
)

// The fields each mapping allows: upstream's YamlRoot, YamlDescriptor,
// YamlRateLimit and yamlReplaces (src/config/config_impl.go). Functions, so
// no package state can be changed.
func topFields() []string { return []string{fDomain, fDescriptors} }
func descriptorFields() []string {
	return []string{fKey, fValue, fRateLimit, fDescriptors, fShadowMode, fQuotaMode,
		fDetailedMetric, fValueToMetric, fShareThreshold, fMetadata}
}
func rateLimitFields() []string {
	return []string{fUnit, fRequestsPerUnit, fUnlimited, fName, fReplaces}
}
func replacesFields() []string { return []string{fName} }

// home says where a field upstream knows belongs. Upstream checks every key
// of the file against one flat list (validKeys), so it silently ignores a
// known field in the wrong place ("unit" beside "key", "shadow_mode" inside
// rate_limit); such a field never does what its author meant, so limiterd
// refuses it and says where it goes.
func home(field string) string {
	switch field {
	case fDomain:
		return "at the top level"
	case fDescriptors:
		return "at the top level or in a descriptor"
	case fUnit, fRequestsPerUnit, fUnlimited, fReplaces:
		return "in a rate_limit block"
	case fName:
		return "in a rate_limit block or a replaces entry"
	}
	if slices.Contains(descriptorFields(), field) {
		return "in a descriptor"
	}
	return ""
}

// fieldSet is a mapping's fields by name, with the problems found reading
// it (unknown, misplaced and repeated fields), held back until the owner's
// label is known. Values are dereferenced.
type fieldSet struct {
	val      map[string]*yaml.Node
	key      map[string]*yaml.Node
	merged   map[string]bool // the field came from a "<<" merge key
	problems []fieldProblem
}

// fieldProblem is a problem of a field, reported once the owner's label
// is known.
type fieldProblem struct {
	line int
	msg  string
}

// fields reads mapping n, allowing only the names in known. YAML merge keys
// ("<<: *anchor", which upstream's yaml.v2 honours) are followed: a field
// given in the mapping itself overrides a merged one, and an earlier merge
// overrides a later one.
func (p *parser) fields(n *yaml.Node, known []string) fieldSet {
	f := fieldSet{val: map[string]*yaml.Node{}, key: map[string]*yaml.Node{}, merged: map[string]bool{}}
	p.collect(n, known, &f, false)
	return f
}

func (p *parser) collect(n *yaml.Node, known []string, f *fieldSet, merged bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Deref(n.Content[i]), yamlnode.Deref(n.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			p.merge(v, known, f)
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			f.problems = append(f.problems, fieldProblem{k.Line, fmt.Sprintf("field %s: field names must be text (upstream: key is not of type string)", yamlnode.Describe(k))})
			continue
		}
		name := k.Value
		if !slices.Contains(known, name) {
			msg := fmt.Sprintf("unknown field (upstream: unknown key '%s'); the fields here are %s", yamlnode.Truncate(name), strings.Join(known, ", "))
			if h := home(name); h != "" {
				msg = fmt.Sprintf("not allowed here: it belongs %s (upstream would silently ignore it here)", h)
			}
			f.problems = append(f.problems, fieldProblem{k.Line, fmt.Sprintf("field %q: %s", yamlnode.Truncate(name), msg)})
			continue
		}
		prev := f.key[name]
		switch {
		case prev == nil, !merged && f.merged[name]:
			f.key[name], f.val[name], f.merged[name] = k, v, merged
		case !merged:
			f.problems = append(f.problems, fieldProblem{k.Line, fmt.Sprintf("field %q: given twice (first at line %d)", name, prev.Line)})
		}
	}
}

// merge follows the value of a "<<" key: a mapping or a list of mappings.
func (p *parser) merge(v *yaml.Node, known []string, f *fieldSet) {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	for _, m := range items {
		m = yamlnode.Deref(m)
		if !p.visit(m) {
			return
		}
		if m.Kind != yaml.MappingNode {
			f.problems = append(f.problems, fieldProblem{m.Line, fmt.Sprintf("field \"<<\": a merge key takes a mapping or a list of mappings, got %s", yamlnode.Describe(m))})
			continue
		}
		if p.onStack[m] {
			f.problems = append(f.problems, fieldProblem{m.Line, "field \"<<\": merges a mapping into itself"})
			continue
		}
		p.onStack[m] = true
		p.collect(m, known, f, true)
		delete(p.onStack, m)
	}
}

// report reports f's problems under label, naming fields with fieldPrefix.
func (p *parser) report(label, fieldPrefix string, f fieldSet) {
	for _, pr := range f.problems {
		msg := pr.msg
		if fieldPrefix != "" {
			msg = strings.Replace(msg, `field "`, `field "`+fieldPrefix, 1)
		}
		p.errs.Add(pr.line, "%s%s", prefix(label), msg)
	}
}

// str reads a scalar as text. Like upstream's yaml.v2, any non-null scalar
// will do, as written: "value: 200" is the text 200, "value: 0x1F" is 0x1F.
// (Upstream's key check refuses floats anywhere, "value: 1.5"; limiterd
// takes them as text, since a version such as 1.5 is a plausible value.)
func str(v *yaml.Node) (string, string) {
	switch {
	case v.Kind == yaml.ScalarNode && !yamlnode.IsNull(v):
		return v.Value, ""
	case yamlnode.IsNull(v):
		return "", "must not be empty"
	}
	return "", "must be text, got " + yamlnode.Describe(v)
}

// boolean reads a boolean as upstream's yaml.v2 does (YAML 1.1): true,
// false, yes, no, on, off, y, n in their usual cases, unquoted. Null is false.
func boolean(v *yaml.Node) (bool, string) {
	if yamlnode.IsNull(v) {
		return false, ""
	}
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!bool" || v.ShortTag() == "!!str" && v.Style == 0) {
		switch v.Value {
		case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y":
			return true, ""
		case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N":
			return false, ""
		}
	}
	return false, "must be true or false, got " + yamlnode.Describe(v)
}

// maxShown bounds how many problems one error lists.
const maxShown = 100

// newProblems is the collector of the problems of the file source.
func newProblems(source string) problems.List {
	return problems.List{Source: source, Unnamed: "config", Sentinel: ErrInvalidConfig, Shown: maxShown}
}
