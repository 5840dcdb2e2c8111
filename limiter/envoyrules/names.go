package envoyrules

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// maxNameLen and nameByte are limiterd's rule-name rule (limiter/validate.go,
// checkName): 1 to 128 bytes of ASCII letters, digits and "-_.:". They are
// repeated here because package limiter does not export them.
const maxNameLen = 128

func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == ':'
}

func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// RuleName returns a limiterd rule name for the node: valid under limiterd's
// rule-name rule (ASCII letters, digits and "-_.:", at most 128 bytes) and,
// for a Descriptor from Parse, unique among all nodes of its Config.
//
// It is the rate_limit "name" when the node has a valid one that no other
// node's name candidate shares; otherwise the Path, when it is a valid name
// that no other node's candidate shares; otherwise the Path with every byte
// outside the allowed set replaced by "_", cut to fit, and "-" plus 8 hex
// digits of a hash of the node's position in the tree appended. Should that
// still collide, "-2", "-3", ... is appended. Names are only unique within
// one Config: a caller combining several files must qualify them.
//
// For a Descriptor not built by Parse, RuleName returns the candidate name
// from Limit.Name or Path, valid but not checked for uniqueness.
func (d *Descriptor) RuleName() string {
	if d.ruleName != "" {
		return d.ruleName
	}
	return candidateName(d, d.Path)
}

// candidateName is the name a node gets unless another node wants it too;
// id identifies the node unambiguously within its Config.
func candidateName(d *Descriptor, id string) string {
	if d.Limit != nil && validName(d.Limit.Name) {
		return d.Limit.Name
	}
	if validName(d.Path) {
		return d.Path
	}
	b := []byte(d.Path)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	return withSuffix(string(b), shortHash(id))
}

// withSuffix appends "-" and suffix to base, cutting base so that the
// result fits maxNameLen.
func withSuffix(base, suffix string) string {
	if room := maxNameLen - 1 - len(suffix); len(base) > room {
		base = base[:room]
	}
	return base + "-" + suffix
}

func shortHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:4])
}

// assignNames gives every node of c its RuleName. A node's id is CountKey of
// the domain and the (key, value) pairs from the top down to it: siblings of
// a valid config have distinct pairs, so ids are distinct, unlike paths
// ("a.b" as one key and "a" then "b" both give the path "d.a.b").
func assignNames(c *Config) {
	var nodes []*Descriptor
	var ids []string
	var walk func(list []*Descriptor, entries []Entry)
	walk = func(list []*Descriptor, entries []Entry) {
		for _, d := range list {
			e := append(entries[:len(entries):len(entries)], Entry{d.Key, d.Value})
			nodes = append(nodes, d)
			ids = append(ids, CountKey(c.Domain, e))
			walk(d.Descriptors, e)
		}
	}
	walk(c.Descriptors, nil)

	cands := make([]string, len(nodes))
	wanted := make(map[string]int, len(nodes))
	for i, d := range nodes {
		cands[i] = candidateName(d, ids[i])
		wanted[cands[i]]++
	}
	used := make(map[string]bool, len(nodes))
	for i, d := range nodes {
		name := cands[i]
		if wanted[name] > 1 {
			// Shared by several nodes: none of them gets it bare, so no
			// node's name depends on which came first.
			name = withSuffix(name, shortHash(ids[i]))
		}
		for n := 2; used[name]; n++ {
			name = withSuffix(cands[i], shortHash(ids[i])+"-"+strconv.Itoa(n))
		}
		used[name] = true
		d.ruleName = name
	}
}
