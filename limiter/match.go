package limiter

import (
	"strings"
	"unicode/utf8"
)

// Key patterns are globs: "*" matches any run of characters (including none,
// and including ":" and "/"), "?" matches exactly one character (a rune, not a
// byte), "\" makes the next character literal. Everything else matches itself.
//
// A pattern is compiled once, when rules are set, into a list of ops so that
// matching a key on the hot path neither allocates nor re-parses escapes.

type opKind uint8

const (
	opLit  opKind = iota // a literal run of text
	opAny                // "?": one rune
	opStar               // "*": any run of runes
)

type op struct {
	kind opKind
	lit  string // the literal text, escapes removed (opLit only)
}

// pattern is a compiled key pattern.
type pattern struct {
	ops []op
}

// compilePattern compiles p, which must pass checkPattern. Adjacent literals
// are merged and runs of "*" collapse to one: neither changes what matches,
// and both make matching cheaper and the canonical form unique.
func compilePattern(p string) pattern {
	var (
		ops []op
		lit strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			ops = append(ops, op{kind: opLit, lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '*':
			flush()
			if len(ops) == 0 || ops[len(ops)-1].kind != opStar {
				ops = append(ops, op{kind: opStar})
			}
		case '?':
			flush()
			ops = append(ops, op{kind: opAny})
		case '\\':
			if i+1 < len(p) {
				i++
				lit.WriteByte(p[i])
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return pattern{ops: ops}
}

// canonical writes the pattern back with the fewest escapes, so two patterns
// that match the same keys for the same reasons ("a\b*" and "ab**") compare
// equal.
func (p pattern) canonical() string {
	var b strings.Builder
	for _, o := range p.ops {
		switch o.kind {
		case opStar:
			b.WriteByte('*')
		case opAny:
			b.WriteByte('?')
		default:
			for i := 0; i < len(o.lit); i++ {
				if c := o.lit[i]; c == '*' || c == '?' || c == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(o.lit[i])
			}
		}
	}
	return b.String()
}

// match reports whether key, which must be valid UTF-8, matches p.
//
// It is the classic greedy glob walk with one backtrack point: on a mismatch
// it returns to the last "*" seen and lets it swallow one more rune. One
// point suffices because every op other than "*" consumes a length fixed by
// where it starts (a literal its own length, "?" one rune), so the segment
// between two stars is best matched at its leftmost position, and an earlier
// star never needs to give anything back. The walk is O(len(ops)·len(key))
// in the worst case and allocates nothing.
func (p pattern) match(key string) bool {
	ops := p.ops
	pi, ki := 0, 0
	starPi, starKi := -1, 0
	for {
		if pi < len(ops) {
			o := &ops[pi]
			switch o.kind {
			case opStar:
				if pi == len(ops)-1 {
					return true // a trailing star takes the rest of any key
				}
				starPi, starKi = pi, ki
				pi++
				continue
			case opAny:
				if ki < len(key) {
					_, n := utf8.DecodeRuneInString(key[ki:])
					ki += n
					pi++
					continue
				}
			default:
				if strings.HasPrefix(key[ki:], o.lit) {
					ki += len(o.lit)
					pi++
					continue
				}
			}
		} else if ki == len(key) {
			return true
		}
		// Mismatch, or ops used up before the key: let the last star take one
		// more rune and retry what follows it.
		if starPi < 0 || starKi >= len(key) {
			return false
		}
		_, n := utf8.DecodeRuneInString(key[starKi:])
		starKi += n
		pi, ki = starPi+1, starKi
	}
}
