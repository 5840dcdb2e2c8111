package limiter

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, key string
		want         bool
	}{
		{"premium:*", "premium:acme", true},
		{"premium:*", "premium:", true},
		{"premium:*", "premium", false},
		{"premium:*", "xpremium:acme", false},
		{"*", "anything/at:all", true},
		{"*", "x", true},
		{"**", "x", true},
		{"api:*", "api:a/b:c", true}, // * crosses ":" and "/"
		{"a*b", "ab", true},
		{"a*b", "axxb", true},
		{"a*b", "axxbx", false},
		{"a*b*c", "abbbc", true},
		{"a*b*c", "acb", false},
		{"*a", "banana", true},
		{"*an*an*", "banana", true},
		{"*an*an*an*", "banana", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "abbc", false},
		{"a?c", "aéc", true}, // ? is one rune, not one byte
		{"??", "é", false},
		{"?", "é", true},
		{"é*", "étoile", true},
		{"*é", "café", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\?`, "a?", true},
		{`a\?`, "ab", false},
		{`a\\`, `a\`, true},
		{`a\b`, "ab", true}, // an escaped ordinary character is itself
		{`\**`, "*x", true},
		{`\**`, "x*", false},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"exact", "exac", false},
		{"*:*:*", "a:b:c", true},
		{"*:*:*", "a:b", false},
		{"?*?", "ab", true},
		{"?*?", "a", false},
		{"a*a*a*a*a*b", strings.Repeat("a", 60), false},
	}
	for _, tt := range tests {
		p := compilePattern(tt.pattern)
		if got := p.match(tt.key); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.key, got, tt.want)
		}
		if got := oracle(tt.pattern, tt.key); got != tt.want {
			t.Errorf("oracle(%q, %q) = %v, want %v (the table or the oracle is wrong)", tt.pattern, tt.key, got, tt.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{"a**b", "a*b"},
		{`a\b`, "ab"},
		{`a\*\?\\`, `a\*\?\\`},
		{"***", "*"},
		{"?*?", "?*?"},
	}
	for _, tt := range tests {
		if got := compilePattern(tt.pattern).canonical(); got != tt.want {
			t.Errorf("canonical(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
		// The canonical form must match exactly the same keys.
		if compilePattern(tt.want).canonical() != tt.want {
			t.Errorf("canonical(%q) is not a fixed point", tt.want)
		}
	}
}

// oracle is the definition of a pattern match, written as directly as
// possible over the raw pattern: recursive, rune by rune, memoised only so
// that many stars cannot make it exponential.
func oracle(pattern, key string) bool {
	memo := map[[2]int]bool{}
	var m func(pi, ki int) bool
	m = func(pi, ki int) bool {
		k := [2]int{pi, ki}
		if v, ok := memo[k]; ok {
			return v
		}
		var res bool
		p, s := pattern[pi:], key[ki:]
		switch {
		case p == "":
			res = s == ""
		case p[0] == '*':
			// Match nothing here, or swallow one rune and stay on the star.
			res = m(pi+1, ki)
			if !res && s != "" {
				_, n := utf8.DecodeRuneInString(s)
				res = m(pi, ki+n)
			}
		case p[0] == '?':
			if s != "" {
				_, n := utf8.DecodeRuneInString(s)
				res = m(pi+1, ki+n)
			}
		default:
			if p[0] == '\\' {
				pi++
				p = p[1:]
			}
			r, pn := utf8.DecodeRuneInString(p)
			kr, kn := utf8.DecodeRuneInString(s)
			res = s != "" && r == kr && m(pi+pn, ki+kn)
		}
		memo[k] = res
		return res
	}
	return m(0, 0)
}

// TestMatchProperty compares the matcher with the oracle on random patterns
// and on keys built to match them, then mutated, so that both outcomes are
// common.
func TestMatchProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", ":", "/", "é", "*", "?", `\`}
	matched := 0
	const rounds = 20000
	for range rounds {
		var p strings.Builder
		for range rng.IntN(8) {
			p.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		pat := p.String()
		if checkPattern(pat) != "" {
			pat += "x" // fix a trailing lone backslash
		}
		key := keyFor(rng, pat)
		if rng.IntN(2) == 0 {
			key = mutate(rng, key)
		}
		want := oracle(pat, key)
		cp := compilePattern(pat)
		if got := cp.match(key); got != want {
			t.Fatalf("match(%q, %q) = %v, oracle says %v", pat, key, got, want)
		}
		if got := compilePattern(cp.canonical()).match(key); got != want {
			t.Fatalf("canonical %q of %q: match(%q) = %v, oracle says %v", cp.canonical(), pat, key, got, want)
		}
		if want {
			matched++
		}
	}
	// Guard the generator: a property checked only on misses proves little.
	if matched < rounds/5 || matched > rounds*4/5 {
		t.Fatalf("%d of %d keys matched; the generator is unbalanced", matched, rounds)
	}
}

// keyFor builds a key that the pattern matches.
func keyFor(rng *rand.Rand, pat string) string {
	var b strings.Builder
	runes := []string{"a", "b", ":", "/", "é", "*", "?"}
	for i := 0; i < len(pat); i++ {
		switch pat[i] {
		case '*':
			for range rng.IntN(4) {
				b.WriteString(runes[rng.IntN(len(runes))])
			}
		case '?':
			b.WriteString(runes[rng.IntN(len(runes))])
		case '\\':
			i++
			b.WriteByte(pat[i])
		default:
			b.WriteByte(pat[i])
		}
	}
	return b.String()
}

// mutate inserts, deletes or replaces one rune.
func mutate(rng *rand.Rand, key string) string {
	rs := []rune(key)
	pos := rng.IntN(len(rs) + 1)
	switch rng.IntN(3) {
	case 0:
		rs = append(rs[:pos], append([]rune{'a'}, rs[pos:]...)...)
	case 1:
		if pos < len(rs) {
			rs = append(rs[:pos], rs[pos+1:]...)
		}
	default:
		if pos < len(rs) {
			rs[pos] = 'b'
		}
	}
	return string(rs)
}

func FuzzMatch(f *testing.F) {
	f.Add("premium:*", "premium:acme")
	f.Add("a*b?c", "axxbéc")
	f.Add(`\*\?\\*`, `*?\x`)
	f.Add("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Fuzz(func(t *testing.T, pat, key string) {
		// Check only sees patterns that validate and keys that are UTF-8;
		// the oracle is memoised over positions, so bound the work.
		if checkPattern(pat) != "" || !utf8.ValidString(key) || len(pat) > 64 || len(key) > 256 {
			return
		}
		want := oracle(pat, key)
		cp := compilePattern(pat)
		if got := cp.match(key); got != want {
			t.Fatalf("match(%q, %q) = %v, oracle says %v", pat, key, got, want)
		}
		if got := compilePattern(cp.canonical()).match(key); got != want {
			t.Fatalf("canonical %q: match(%q) = %v, oracle says %v", cp.canonical(), key, got, want)
		}
	})
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p := compilePattern("a*b?c*é")
	key := strings.Repeat("ab", 100) + "bxc-é"
	if n := testing.AllocsPerRun(100, func() { p.match(key) }); n != 0 {
		t.Fatalf("match allocates %v times", n)
	}
}
