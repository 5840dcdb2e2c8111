package envoyrules

import (
	"github.com/limiterd/limiterd/internal/yamlnode"
	"github.com/limiterd/limiterd/limiter/internal/problems"

	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/counter"
)

// Load reads and parses the envoyproxy/ratelimit config file at path; see
// Parse. An error reading the file does not wrap ErrInvalidConfig, so a
// caller can tell a missing file (errors.Is(err, fs.ErrNotExist)) from a bad one.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoyrules: read config: %w", err)
	}
	return Parse(path, data)
}

// Parse parses and validates one envoyproxy/ratelimit config file (format in
// doc.go). source names the file in messages. Every problem found is
// reported, each as `source:line: descriptor "path": field "f": what is
// wrong`, in one error that wraps ErrInvalidConfig.
func Parse(source string, data []byte) (*Config, error) {
	p := parser{errs: newProblems(source), maxNodes: nodeSlack + len(data), onStack: make(map[*yaml.Node]bool)}
	c := p.file(data)
	if err := p.errs.Err(); err != nil {
		return nil, err
	}
	buildIndex(c)
	assignNames(c)
	return c, nil
}

// IsEnvoyConfig reports whether data is a YAML document whose top level is a
// mapping with a "domain" field: how limiterd tells an envoyproxy/ratelimit
// file from its own rule file, whose top-level field is "rules". It does not
// validate the file.
func IsEnvoyConfig(data []byte) bool {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return false
	}
	root := yamlnode.Deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := yamlnode.Deref(root.Content[i]); k.Kind == yaml.ScalarNode && k.ShortTag() == "!!str" && k.Value == fDomain {
			return true
		}
	}
	return false
}

// Limits on what one file may make the parser do. Aliases can make a small
// file stand for a huge tree, or (yaml.v3 allows it) a cyclic one. Every
// list item and merged mapping visited takes at least 2 bytes of a file
// written out ("{}"), so a file without aliases never reaches maxNodes; the
// slack lets aliases repeat parts of a file many times over.
const (
	nodeSlack = 10000 // nodes allowed beyond one per byte of input
	maxDepth  = 64    // descriptor nesting; upstream configs use a few levels
)

type parser struct {
	errs     problems.List
	nodes    int
	maxNodes int // nodeSlack + len(data)
	tooBig   bool
	onStack  map[*yaml.Node]bool // descriptor and merge mappings being read
}

// visit counts one node against maxNodes, reporting once when it runs out.
func (p *parser) visit(n *yaml.Node) bool {
	p.nodes++
	if p.nodes <= p.maxNodes {
		return true
	}
	if !p.tooBig {
		p.tooBig = true
		p.errs.Add(n.Line, "the file is too large once aliases are expanded: more than %d descriptors, list items and merges", p.maxNodes)
	}
	return false
}

func (p *parser) file(data []byte) *Config {
	// Deviation: upstream (yaml.v2 Unmarshal) silently reads only the
	// first document of a file, dropping every limit in the others.
	root := p.errs.Document(data, fmt.Sprintf("the file is empty: an envoyproxy/ratelimit config needs a %q", fDomain),
		"a config file holds one YAML document, found a second (envoyproxy/ratelimit would silently ignore it)")
	if root == nil {
		return nil
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = yamlnode.Deref(root.Content[0])
	}
	if yamlnode.IsNull(root) {
		p.errs.Add(root.Line, "the file is empty: an envoyproxy/ratelimit config needs a %q", fDomain)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errs.Add(root.Line, "the file must be a mapping with %q and %q, got %s", fDomain, fDescriptors, yamlnode.Describe(root))
		return nil
	}
	fs := p.fields(root, topFields())
	p.report("", "", fs)
	c := &Config{}
	switch v := fs.val[fDomain]; {
	case v == nil:
		p.errs.Add(root.Line, "field %q: missing (upstream: config file cannot have empty domain)", fDomain)
	default:
		s, msg := str(v)
		if msg == "" && s == "" {
			msg = "must not be empty (upstream: config file cannot have empty domain)"
		}
		if msg != "" {
			p.errs.Add(v.Line, "field %q: %s", fDomain, msg)
		}
		c.Domain = s
	}
	c.Descriptors = p.list(fs.val[fDescriptors], c.Domain, "", 1)
	return c
}

// list reads a "descriptors" list (nil or null: none) under the node at
// parent; label names the owner in messages ("" at the top level).
func (p *parser) list(v *yaml.Node, parent, label string, depth int) []*Descriptor {
	if v == nil || yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.errs.Add(v.Line, "%sfield %q: must be a list of descriptors, got %s", prefix(label), fDescriptors, yamlnode.Describe(v))
		return nil
	}
	if depth > maxDepth {
		p.errs.Add(v.Line, "%sfield %q: descriptors nest more than %d levels deep", prefix(label), fDescriptors, maxDepth)
		return nil
	}
	out := make([]*Descriptor, 0, len(v.Content))
	first := make(map[string]*Descriptor, len(v.Content))
	for i, item := range v.Content {
		item = yamlnode.Deref(item)
		if !p.visit(item) {
			return out
		}
		if item.Kind != yaml.MappingNode {
			p.errs.Add(item.Line, "%sfield %q: item %d must be a mapping with a %q, got %s", prefix(label), fDescriptors, i, fKey, yamlnode.Describe(item))
			continue
		}
		if p.onStack[item] {
			p.errs.Add(item.Line, "%sfield %q: item %d is an alias of a descriptor that contains it", prefix(label), fDescriptors, i)
			continue
		}
		p.onStack[item] = true
		d, keyOK := p.descriptor(item, parent, i, depth)
		delete(p.onStack, item)
		if keyOK {
			if f := first[d.composite]; f != nil {
				p.errs.Add(d.Line, "descriptor %q: duplicate descriptor composite key %q: the descriptor at line %d has it already", d.Path, d.composite, f.Line)
			} else {
				first[d.composite] = d
			}
		}
		out = append(out, d)
	}
	return out
}

// descriptor reads item i of a descriptor list; keyOK reports that it has a
// valid key, so that its composite key and Path are set.
func (p *parser) descriptor(n *yaml.Node, parent string, i, depth int) (d *Descriptor, keyOK bool) {
	fs := p.fields(n, descriptorFields())
	d = &Descriptor{Line: n.Line}
	var keyMsg, valueMsg string
	keyLine := n.Line
	if k := fs.val[fKey]; k == nil || yamlnode.IsNull(k) {
		keyMsg = "missing (upstream: descriptor has empty key)"
	} else {
		keyLine = k.Line
		d.Key, keyMsg = str(k)
		if keyMsg == "" && d.Key == "" {
			keyMsg = "must not be empty (upstream: descriptor has empty key)"
		}
	}
	if v := fs.val[fValue]; v != nil && !yamlnode.IsNull(v) {
		d.Value, valueMsg = str(v)
	}
	keyOK = keyMsg == "" && valueMsg == ""
	if keyOK {
		d.composite = compositeOf(d)
		d.Path = joinPath(parent, d.composite)
		d.Wildcard = strings.Contains(d.composite, "*")
		if d.Wildcard {
			d.parts = strings.Split(d.composite, "*")
		}
	} else {
		d.Path = joinPath(parent, fmt.Sprintf("descriptors[%d]", i))
	}
	label := fmt.Sprintf("descriptor %q", d.Path)
	if keyMsg != "" {
		p.errs.Add(keyLine, "%s: field %q: %s", label, fKey, keyMsg)
	}
	if valueMsg != "" {
		p.errs.Add(fs.val[fValue].Line, "%s: field %q: %s", label, fValue, valueMsg)
	}
	p.report(label, "", fs)

	if v := fs.val[fRateLimit]; v != nil && !yamlnode.IsNull(v) {
		d.Limit, d.Replaces = p.rateLimit(v, fs.key[fRateLimit].Line, label)
	}
	d.ShadowMode = p.flag(fs, fShadowMode, label, "")
	// Metrics-only fields: they change the names of upstream's stats, which
	// limiterd does not produce, and nothing about limiting.
	p.flag(fs, fDetailedMetric, label, "")
	p.flag(fs, fValueToMetric, label, "")
	if p.flag(fs, fQuotaMode, label, "") {
		p.errs.Add(fs.val[fQuotaMode].Line, "%s: field %q: not supported by limiterd (upstream fails a request for quota-mode descriptors only when all of them are over their limits); remove it or set it to false", label, fQuotaMode)
	}
	if p.flag(fs, fShareThreshold, label, "") {
		p.errs.Add(fs.val[fShareThreshold].Line, "%s: field %q: not supported by limiterd (upstream counts every value matching the wildcard in one shared counter; limiterd would count each value apart and allow more); remove it or set it to false", label, fShareThreshold)
	}
	if v := fs.val[fMetadata]; v != nil && !yamlnode.IsNull(v) && v.Kind != yaml.MappingNode {
		// Upstream returns metadata in the response's dynamic metadata when
		// RESPONSE_DYNAMIC_METADATA is enabled; it never changes a decision.
		// limiterd accepts and ignores it.
		p.errs.Add(v.Line, "%s: field %q: must be a mapping, got %s", label, fMetadata, yamlnode.Describe(v))
	}
	d.Descriptors = p.list(fs.val[fDescriptors], d.Path, label, depth+1)
	return d, keyOK
}

// Unit names, upstream's protobuf enum RateLimitResponse.RateLimit.Unit,
// with their lengths from upstream's UnitToDivider (src/utils/utilities.go).
var unitWindows = map[string]time.Duration{
	"SECOND": time.Second,
	"MINUTE": time.Minute,
	"HOUR":   time.Hour,
	"DAY":    24 * time.Hour,
	"WEEK":   7 * 24 * time.Hour,
	"MONTH":  30 * 24 * time.Hour,
	"YEAR":   365 * 24 * time.Hour,
}

const unitList = "second, minute, hour, day, week or month"

// Fields of a rate_limit block are named "rate_limit.unit" and so on in
// messages.
const rlPrefix = fRateLimit + "."

// rateLimit reads a "rate_limit" mapping; a missing field is reported at
// line, the "rate_limit" key's.
func (p *parser) rateLimit(v *yaml.Node, line int, label string) (*RateLimit, []string) {
	if v.Kind != yaml.MappingNode {
		p.errs.Add(v.Line, "%s: field %q: must be a mapping with %q and %q, got %s", label, fRateLimit, fUnit, fRequestsPerUnit, yamlnode.Describe(v))
		return nil, nil
	}
	fs := p.fields(v, rateLimitFields())
	p.report(label, rlPrefix, fs)
	rl := &RateLimit{}
	rl.Unlimited = p.flag(fs, fUnlimited, label, rlPrefix)
	if n := fs.val[fName]; n != nil && !yamlnode.IsNull(n) {
		var msg string
		if rl.Name, msg = str(n); msg != "" {
			p.errs.Add(n.Line, "%s: field %q: %s", label, rlPrefix+fName, msg)
		}
	}
	unit, rpu := fs.val[fUnit], fs.val[fRequestsPerUnit]
	if unit != nil && yamlnode.IsNull(unit) {
		unit = nil
	}
	if rpu != nil && yamlnode.IsNull(rpu) {
		rpu = nil
	}
	if rl.Unlimited {
		// Upstream refuses a valid unit with unlimited ("should not specify
		// rate limit unit when unlimited") but ignores an invalid one, and
		// requests_per_unit; both are refused here, as contradicting
		// "unlimited" or being a typo.
		if unit != nil {
			p.errs.Add(unit.Line, "%s: field %q: must not be given when %q is true (upstream: should not specify rate limit unit when unlimited)", label, rlPrefix+fUnit, rlPrefix+fUnlimited)
		}
		if rpu != nil {
			p.errs.Add(rpu.Line, "%s: field %q: must not be given when %q is true", label, rlPrefix+fRequestsPerUnit, rlPrefix+fUnlimited)
		}
	} else {
		p.unit(rl, unit, line, label)
		p.requests(rl, rpu, line, label)
	}
	return rl, p.replaces(fs.val[fReplaces], rl.Name, label)
}

// unit reads "unit" as upstream does: an enum name but UNKNOWN, in any case.
func (p *parser) unit(rl *RateLimit, v *yaml.Node, line int, label string) {
	const field = rlPrefix + fUnit
	if v == nil {
		p.errs.Add(line, "%s: field %q: missing: must be one of %s (or set %q)", label, field, unitList, "unlimited: true")
		return
	}
	s, msg := str(v)
	if msg != "" {
		p.errs.Add(v.Line, "%s: field %q: %s", label, field, msg)
		return
	}
	name := strings.ToUpper(s) // as upstream: strings.ToUpper, then the enum
	w, ok := unitWindows[name]
	switch {
	case !ok:
		p.errs.Add(v.Line, "%s: field %q: invalid rate limit unit %q: must be one of %s", label, field, yamlnode.Truncate(s), unitList)
	case w > counter.MaxWindow:
		// Deviation: limiterd's counter cannot keep a window this long.
		p.errs.Add(v.Line, "%s: field %q: %q (%dh) is longer than limiterd's longest window, %dh: use month or shorter", label, field, s, int64(w/time.Hour), int64(counter.MaxWindow/time.Hour))
	default:
		rl.Unit, rl.Window = name, w
	}
}

// requests reads "requests_per_unit": a YAML integer 0..counter.MaxLimit.
// 0 is upstream's "every request is over the limit" (RateLimit.DeniesAll):
// upstream counts the hit and finds it above 0 (src/limiter/base_limiter.go,
// GetResponseDescriptorStatus). Deviations: a missing field, which upstream's
// yaml.v2 struct reads as 0 and so as "deny everything", is refused, as it
// is far more often a forgotten line than a ban; and values above
// counter.MaxLimit, which upstream takes (any uint32), are refused because
// limiterd's counter cannot count that far.
func (p *parser) requests(rl *RateLimit, v *yaml.Node, line int, label string) {
	const field = rlPrefix + fRequestsPerUnit
	if v == nil {
		p.errs.Add(line, "%s: field %q: missing: must be an integer between 0 and %d (upstream reads a missing requests_per_unit as 0 and denies every request; write \"requests_per_unit: 0\" if that is meant)", label, field, counter.MaxLimit)
		return
	}
	var n int64
	isInt := v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" && v.Decode(&n) == nil
	if isInt && n >= 0 && n <= counter.MaxLimit {
		rl.RequestsPerUnit = uint32(n)
		return
	}
	p.errs.Add(v.Line, "%s: field %q: must be an integer between 0 and %d, got %s", label, field, counter.MaxLimit, yamlnode.Describe(v))
}

// replaces reads "replaces": a list of mappings with a "name".
func (p *parser) replaces(v *yaml.Node, own, label string) []string {
	if v == nil || yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		p.errs.Add(v.Line, "%s: field %q: must be a list of {name: ...}, got %s", label, rlPrefix+fReplaces, yamlnode.Describe(v))
		return nil
	}
	var out []string
	for i, item := range v.Content {
		item = yamlnode.Deref(item)
		if !p.visit(item) {
			return out
		}
		at := fmt.Sprintf("%s%s[%d]", rlPrefix, fReplaces, i)
		if item.Kind != yaml.MappingNode {
			p.errs.Add(item.Line, "%s: field %q: must be a mapping with a %q, got %s", label, at, fName, yamlnode.Describe(item))
			continue
		}
		fs := p.fields(item, replacesFields())
		p.report(label, at+".", fs)
		n := fs.val[fName]
		var name, msg string
		if n != nil && !yamlnode.IsNull(n) {
			name, msg = str(n)
		}
		switch {
		case msg != "":
		case name == "":
			msg = "must name a limit (upstream: should not have an empty replaces entry)"
		case name == own:
			msg = fmt.Sprintf("%q is this limit's own name (upstream: replaces should not contain name of same descriptor)", name)
		default:
			out = append(out, name)
			continue
		}
		line := item.Line
		if n != nil {
			line = n.Line
		}
		p.errs.Add(line, "%s: field %q: %s", label, at+"."+fName, msg)
	}
	return out
}

// flag reads an optional boolean field of fs (false when absent or null);
// fieldPrefix goes before its name in messages.
func (p *parser) flag(fs fieldSet, field, label, fieldPrefix string) bool {
	v := fs.val[field]
	if v == nil {
		return false
	}
	b, msg := boolean(v)
	if msg != "" {
		p.errs.Add(v.Line, "%sfield %q: %s", prefix(label), fieldPrefix+field, msg)
	}
	return b
}

func joinPath(parent, composite string) string {
	if parent == "" {
		return composite
	}
	return parent + "." + composite
}

// prefix turns a label into a message prefix ("" stays "").
func prefix(label string) string {
	if label == "" {
		return ""
	}
	return label + ": "
}

// buildIndex indexes every descriptor list of c for Match.
func buildIndex(c *Config) {
	c.index = indexOf(c.Descriptors)
}

func indexOf(list []*Descriptor) *level {
	if len(list) == 0 {
		return nil
	}
	l := &level{exact: make(map[string]*Descriptor, len(list))}
	for _, d := range list {
		l.exact[d.composite] = d
		if d.Wildcard {
			l.wild = append(l.wild, d)
		}
		d.index = indexOf(d.Descriptors)
	}
	return l
}
