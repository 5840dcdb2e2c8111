package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// envoyPrefix starts the name of every rule made from an Envoy descriptor,
// so that such rules are recognisable in headers, logs and metrics.
const envoyPrefix = "envoy:"

// parseEnvoy parses an envoyproxy/ratelimit file into a rule set: its
// Config in Envoy, and a ByName rule for every descriptor node with a
// counted limit (see doc.go, "Envoy files").
func parseEnvoy(source string, data []byte) (*RuleSet, error) {
	c, err := envoyrules.Parse(source, data)
	if err != nil {
		return nil, &envoyError{err}
	}
	rs := &RuleSet{Source: source, Rules: envoyRules(c), Envoy: []*envoyrules.Config{c}}
	if err := rs.Validate(); err != nil {
		return nil, err
	}
	return rs, nil
}

// envoyRules returns the rules of c's counted limits, depth first in file
// order. Unlimited nodes, nodes whose limit denies every request and nodes
// without a limit count nothing: the frontend answers them from the
// Config alone.
func envoyRules(c *envoyrules.Config) []Rule {
	var rules []Rule
	var walk func([]*envoyrules.Descriptor)
	walk = func(list []*envoyrules.Descriptor) {
		for _, d := range list {
			if d.Limit != nil && !d.Limit.Unlimited && !d.Limit.DeniesAll() {
				name := EnvoyRuleName(c.Domain, d)
				rules = append(rules, Rule{
					Name: name,
					Limits: []LimitSpec{{
						Policy: policyName(name, 1, d.Limit.Window),
						Limit:  int64(d.Limit.RequestsPerUnit),
						Window: d.Limit.Window,
						Slices: defaultSlices(d.Limit.Window),
					}},
					Shadow: d.ShadowMode,
					Line:   d.Line,
					ByName: true,
				})
			}
			walk(d.Descriptors)
		}
	}
	walk(c.Descriptors)
	return rules
}

// EnvoyRuleName returns the name of the rule that counts the limit of
// descriptor node d of the Envoy config for domain: the name a frontend
// puts in Request.Rule for a request descriptor that d governs. d must not
// be nil.
//
// It is "envoy:" + domain + ":" + d.RuleName() when that is a valid rule
// name and the domain contains nothing but ASCII letters, digits and "-_.".
// Otherwise it is "envoy::" + the domain with every other byte replaced by
// "_" + ":" + d.RuleName(), cut to fit the name length limit, + "-" and 8
// hex digits of a SHA-256 of the domain and d.RuleName(). Names are
// deterministic, and unique per (domain, node): RuleName is unique within
// its Config; a domain without ":" ends where the first ":" after "envoy:"
// is, so two plain names never share a name; a plain name never starts
// with "envoy::", as domains are not empty; and sanitised names differ by
// their hash.
func EnvoyRuleName(domain string, d *envoyrules.Descriptor) string {
	node := d.RuleName()
	if plainDomain(domain) {
		if name := envoyPrefix + domain + ":" + node; len(name) <= maxNameLen {
			return name
		}
	}
	b := []byte(domain)
	for i, c := range b {
		if !nameByte(c) || c == ':' {
			b[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(domain + "\x00" + node)) // a rule name has no NUL: the split is unambiguous
	suffix := "-" + hex.EncodeToString(sum[:4])
	base := envoyPrefix + ":" + string(b) + ":" + node
	if room := maxNameLen - len(suffix); len(base) > room {
		base = base[:room]
	}
	return base + suffix
}

// plainDomain reports whether domain can stand in a rule name as it is and
// is free of ":", which ends it there.
func plainDomain(domain string) bool {
	if domain == "" {
		return false
	}
	for i := 0; i < len(domain); i++ {
		if c := domain[i]; !nameByte(c) || c == ':' {
			return false
		}
	}
	return true
}

// envoyError is an Envoy file that envoyrules refused. It matches both
// ErrInvalidRules, as every rule-file error does, and
// envoyrules.ErrInvalidConfig, with one prefix in its text.
type envoyError struct{ err error }

func (e *envoyError) Error() string {
	msg := e.err.Error()
	if rest, ok := strings.CutPrefix(msg, envoyrules.ErrInvalidConfig.Error()+": "); ok {
		msg = rest
	}
	return ErrInvalidRules.Error() + ": " + msg
}

func (e *envoyError) Unwrap() []error { return []error{ErrInvalidRules, e.err} }
