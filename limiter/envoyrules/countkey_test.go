package envoyrules

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"testing/quick"
	"unicode/utf8"
)

// decodeCountKey inverts CountKey. That such an inverse exists is what
// makes CountKey injective: distinct inputs cannot give one key.
func decodeCountKey(t *testing.T, key string) (string, []Entry) {
	t.Helper()
	var fields []string // domain, key1, value1, key2, value2, ...
	var cur []byte
	var seps []byte // the unescaped separator before each field after the first
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '\\':
			i++
			if i == len(key) {
				t.Fatalf("key %q ends in a lone backslash", key)
			}
			if e := key[i]; e != '\\' && e != '|' && e != '=' {
				t.Fatalf("key %q escapes %q, which needs no escape", key, e)
			}
			cur = append(cur, key[i])
		case '|', '=':
			fields = append(fields, string(cur))
			seps = append(seps, c)
			cur = cur[:0]
		default:
			cur = append(cur, c)
		}
	}
	fields = append(fields, string(cur))
	var entries []Entry
	for i := 1; i < len(fields); i += 2 {
		if seps[i-1] != '|' || i+1 >= len(fields) || seps[i] != '=' {
			t.Fatalf("key %q does not alternate | and =", key)
		}
		entries = append(entries, Entry{fields[i], fields[i+1]})
	}
	return fields[0], entries
}

// genText draws short strings rich in separators and escapes, where an
// ambiguous encoding would show.
func genText(r *rand.Rand) string {
	const alphabet = `ab_|=\.*`
	b := make([]byte, r.IntN(5))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func genInput(r *rand.Rand) (string, []Entry) {
	entries := make([]Entry, r.IntN(4))
	for i := range entries {
		entries[i] = Entry{genText(r), genText(r)}
	}
	return genText(r), entries
}

func TestCountKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		domain, entries := genInput(r)
		key := CountKey(domain, entries)
		gotDomain, gotEntries := decodeCountKey(t, key)
		if gotDomain != domain || !slices.Equal(gotEntries, entries) {
			t.Fatalf("CountKey(%q, %q) = %q, which decodes to %q, %q", domain, entries, key, gotDomain, gotEntries)
		}
	}
}

// TestCountKeyInjective checks directly, over many small inputs, that no
// two distinct inputs share a key, and with testing/quick over arbitrary
// strings that the key decodes back to its input.
func TestCountKeyInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type input struct {
		domain  string
		entries []Entry
	}
	seen := map[string]input{}
	for range 50000 {
		domain, entries := genInput(r)
		key := CountKey(domain, entries)
		if prev, ok := seen[key]; ok && (prev.domain != domain || !slices.Equal(prev.entries, entries)) {
			t.Fatalf("CountKey(%q, %q) = CountKey(%q, %q) = %q", domain, entries, prev.domain, prev.entries, key)
		}
		seen[key] = input{domain, entries}
	}
	roundTrip := func(domain string, keys, values []string) bool {
		entries := make([]Entry, min(len(keys), len(values)))
		for i := range entries {
			entries[i] = Entry{keys[i], values[i]}
		}
		d, e := decodeCountKey(t, CountKey(domain, entries))
		return d == domain && reflect.DeepEqual(e, entries) || len(entries) == 0 && d == domain && e == nil
	}
	if err := quick.Check(roundTrip, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

func TestCountKeyExamples(t *testing.T) {
	tests := []struct {
		domain  string
		entries []Entry
		want    string
	}{
		{"d", nil, "d"},
		{"d", ents("", ""), "d|="},
		{"messaging", ents("to_number", "2061111111"), "messaging|to_number=2061111111"},
		{"d", ents("a|b", "c=d", "e", `f\`), `d|a\|b=c\=d|e=f\\`},
		{"a|b", ents("c", "d"), `a\|b|c=d`},
	}
	for _, tt := range tests {
		if got := CountKey(tt.domain, tt.entries); got != tt.want {
			t.Errorf("CountKey(%q, %v) = %q, want %q", tt.domain, tt.entries, got, tt.want)
		}
	}
	// Upstream's "_" join makes these one key; CountKey keeps them apart.
	pairs := [][2][]Entry{
		{ents("a_b", "c"), ents("a", "b_c")},
		{ents("a", "b", "c", "d"), ents("a", "b|c=d")},
		{ents("a", ""), nil},
	}
	for _, p := range pairs {
		if CountKey("d", p[0]) == CountKey("d", p[1]) {
			t.Errorf("CountKey(d, %v) = CountKey(d, %v)", p[0], p[1])
		}
	}
	if k := CountKey("dömain", ents("ключ", "値")); !utf8.ValidString(k) {
		t.Errorf("CountKey of UTF-8 input is not UTF-8: %q", k)
	}
}
