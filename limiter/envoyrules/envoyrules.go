package envoyrules

import (
	"errors"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every error Parse returns for a file it
// read but could not accept: bad YAML, an unknown or misplaced field, an
// invalid value, or a field limiterd does not support.
var ErrInvalidConfig = errors.New("envoyrules: invalid config")

// Config is one envoyproxy/ratelimit configuration file: a domain and its
// descriptor tree. Obtain one from Parse or Load; it is immutable afterwards
// and safe for concurrent use. The zero Config matches nothing.
type Config struct {
	// Domain is the file's "domain": requests name it in their domain field.
	Domain string
	// Descriptors is the top-level descriptor list, in file order.
	Descriptors []*Descriptor

	index *level // Descriptors by composite key, built by Parse
}

// Descriptor is one node of the descriptor tree.
type Descriptor struct {
	// Key is the descriptor's "key" (never empty in a parsed config).
	Key string
	// Value is its "value"; "" means the node matches any value of Key.
	Value string
	// Wildcard reports that the node's composite key (Key, or Key + "_" +
	// Value) contains "*", so it also matches by pattern (see doc.go).
	// Parse sets it; Match decides from Key and Value, not from this field.
	Wildcard bool
	// Limit is the "rate_limit" block, nil when the node has none.
	Limit *RateLimit
	// ShadowMode is "shadow_mode": the limit is counted and reported but
	// never denies. It only has an effect on a node with a Limit.
	ShadowMode bool
	// Replaces lists the names in "rate_limit: replaces:" (see doc.go).
	Replaces []string
	// Descriptors is the nested descriptor list, in file order.
	Descriptors []*Descriptor
	// Path names the node as envoyproxy/ratelimit names it in its stats:
	// the domain and each composite key from the top, joined by ".", e.g.
	// "messaging.message_type_marketing.to_number".
	Path string
	// Line is the line of the descriptor in its file (0 if not from a file).
	Line int

	composite string   // Key, or Key + "_" + Value
	index     *level   // Descriptors by composite key, built by Parse
	parts     []string // composite split on "*", for a wildcard node
	ruleName  string   // assigned by Parse, unique in the Config
}

// RateLimit is a descriptor's "rate_limit" block.
type RateLimit struct {
	// Unit is the unit as upstream's protobuf enum names it: "SECOND",
	// "MINUTE", "HOUR", "DAY", "WEEK" or "MONTH" ("" when Unlimited). The
	// file may spell it in any case ("second", "Second").
	Unit string
	// RequestsPerUnit is "requests_per_unit", 0..2147483647 (0 when
	// Unlimited). 0 without Unlimited means every request is over the
	// limit: see DeniesAll.
	RequestsPerUnit uint32
	// Window is the length of Unit (0 when Unlimited).
	Window time.Duration
	// Unlimited is "unlimited: true": the descriptor is known, is never
	// counted and always answers OK.
	Unlimited bool
	// Name is the optional "name", which other limits' "replaces" refer to.
	Name string
}

// DeniesAll reports that the limit is "requests_per_unit: 0" (and not
// Unlimited): upstream answers every request it governs OVER_LIMIT, so the
// caller answers without counting: status OVER_LIMIT (OK in shadow mode),
// current_limit with requests_per_unit 0 and Unit, limit_remaining 0, and
// duration_until_reset Window (see doc.go). Unit and Window are set as for
// any counted limit. DeniesAll is false for a nil limit.
func (l *RateLimit) DeniesAll() bool {
	return l != nil && !l.Unlimited && l.RequestsPerUnit == 0
}

// Entry is one entry of a request descriptor: Envoy sends a descriptor as a
// list of key/value entries, e.g. [("to_cluster", "a"), ("user", "u1")].
type Entry struct {
	Key, Value string
}

// level indexes one descriptor list the way upstream does: a map by
// composite key, and the wildcard nodes in file order.
type level struct {
	exact map[string]*Descriptor
	wild  []*Descriptor
}

// Match returns the descriptor node whose limit governs a request descriptor
// with these entries, or nil when no limit applies: no node matches, the
// entries run deeper or shallower than the tree, or the node reached has no
// rate_limit. It follows upstream's GetLimit (src/config/config_impl.go):
//
//   - entry i is looked up among the children of the node entry i-1 found
//     (the top-level list for entry 0): first the node whose composite key is
//     entry.Key + "_" + entry.Value; then the first wildcard node, in file
//     order, whose pattern matches that string; then the node whose composite
//     key is entry.Key alone (a node with no value);
//   - the walk stops, with no limit, when nothing is found or the node found
//     has no children but entries remain;
//   - only the node found for the last entry counts: a limit on a node
//     above it does not apply.
//
// Match does not look at the request's domain: compare it with c.Domain.
func (c *Config) Match(entries []Entry) *Descriptor {
	if c == nil || len(entries) == 0 {
		return nil
	}
	list, idx := c.Descriptors, c.index
	for i, e := range entries {
		d := find(list, idx, e)
		if d == nil {
			return nil
		}
		if i == len(entries)-1 {
			if d.Limit == nil {
				return nil
			}
			return d
		}
		if len(d.Descriptors) == 0 {
			return nil
		}
		list, idx = d.Descriptors, d.index
	}
	return nil
}

// find is one step of the walk over list (indexed by idx when Parse built
// it; a Config built by hand is scanned, with the same result).
func find(list []*Descriptor, idx *level, e Entry) *Descriptor {
	full := e.Key + "_" + e.Value
	if idx != nil {
		if d := idx.exact[full]; d != nil {
			return d
		}
		for _, d := range idx.wild {
			if wildcardMatch(d.parts, full) {
				return d
			}
		}
		return idx.exact[e.Key]
	}
	for _, d := range list {
		if compositeOf(d) == full {
			return d
		}
	}
	for _, d := range list {
		if c := compositeOf(d); strings.Contains(c, "*") && wildcardMatch(strings.Split(c, "*"), full) {
			return d
		}
	}
	for _, d := range list {
		if compositeOf(d) == e.Key {
			return d
		}
	}
	return nil
}

// compositeOf is upstream's finalKey: the key, with "_" and the value
// appended when there is a value.
func compositeOf(d *Descriptor) string {
	if d.composite != "" {
		return d.composite
	}
	if d.Value == "" {
		return d.Key
	}
	return d.Key + "_" + d.Value
}

// wildcardMatch reports whether value matches a pattern split on "*", each
// "*" matching any run of bytes, including none. It is upstream's
// wildcardMatch (src/config/config_impl.go), kept byte for byte in behaviour.
// Note that upstream matches the pattern "key_value*" against the string
// "key_value", so the key takes part in the match as well.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	if !strings.HasPrefix(value, parts[0]) || !strings.HasSuffix(value, parts[len(parts)-1]) {
		return false
	}
	fixed := 0
	for _, p := range parts {
		fixed += len(p)
	}
	if len(value) < fixed {
		return false
	}
	rest := value[len(parts[0]):]
	rest = rest[:len(rest)-len(parts[len(parts)-1])]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// CountKey returns the key to count a request descriptor under: the domain
// and every entry's key and value, whichever node matched (upstream's cache
// key, src/limiter/cache_key.go, also holds every key and value, so values
// matched by a key-only or wildcard node are counted apart). Upstream joins
// them with "_", which is ambiguous; CountKey writes
//
//	domain|key1=value1|key2=value2
//
// with "\", "|" and "=" inside the domain, keys and values escaped by a
// backslash, so distinct inputs always give distinct keys. The time window
// that upstream appends is not part of it: limiterd's counter keeps windows.
// The key is valid UTF-8 when its inputs are; the caller enforces any length
// limit (limiter.MaxKeyBytes).
func CountKey(domain string, entries []Entry) string {
	n := len(domain)
	for _, e := range entries {
		n += 2 + len(e.Key) + len(e.Value)
	}
	var b strings.Builder
	b.Grow(n + n/8)
	writeEscaped(&b, domain)
	for _, e := range entries {
		b.WriteByte('|')
		writeEscaped(&b, e.Key)
		b.WriteByte('=')
		writeEscaped(&b, e.Value)
	}
	return b.String()
}

func writeEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, `\|=`)
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		b.WriteByte('\\')
		b.WriteByte(s[i])
		s = s[i+1:]
	}
}
