// Package yamlnode holds the small helpers limiterd's rule-file parsers
// (package limiter and limiter/envoyrules) share over go.yaml.in/yaml/v3
// nodes, so that both name problems the same way. Pure functions, no state.
package yamlnode

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// SyntaxError splits a YAML syntax error into the line it names (0 if
// none) and the rest of its message.
func SyntaxError(err error) (line int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return n, after
			}
		}
	}
	return 0, msg
}

// Deref follows aliases (*name) to the node they stand for. The chain is
// bounded: yaml rejects an alias to an anchor not yet complete.
func Deref(n *yaml.Node) *yaml.Node {
	for range 100 {
		if n.Kind != yaml.AliasNode || n.Alias == nil {
			return n
		}
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is YAML's null (nothing, ~ or null).
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names what a node holds, for "got ..." in messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing"
		}
		if n.ShortTag() == "!!str" {
			return strconv.Quote(Truncate(n.Value))
		}
		return Truncate(n.Value)
	}
	return "an unsupported YAML node"
}

// Truncate shortens text quoted back in a message: the point is to
// recognise it, and the file may hold anything.
func Truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
