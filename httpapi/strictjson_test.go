package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStrictJSONAccepts: what strictJSON lets through means what it says.
func TestStrictJSONAccepts(t *testing.T) {
	for _, tc := range []struct{ body, key string }{
		{`{"key":"\ud83d\ude00"}`, "\U0001F600"}, // a pair is one character
		{`{"key":"a\\ud800"}`, `a\ud800`},        // an escaped backslash, then text
		{`{"rule":"api","key":"x","hits":2}`, "x"},
		{`{"key":"\u00e9t\u00e9"}`, "été"},
	} {
		if p := strictJSON([]byte(tc.body)); p.status != 0 {
			t.Errorf("%s: %v", tc.body, p.msg)
			continue
		}
		ps, p := parseJSON([]byte(tc.body))
		if p.status != 0 || ps.key != tc.key {
			t.Errorf("%s: key %q, %v; want %q", tc.body, ps.key, p.msg, tc.key)
		}
	}
}

// FuzzStrictJSON: strictJSON never panics, and a body it and the decoder
// accept has a key with no U+FFFD the body did not spell out (a lone
// surrogate escape never gets through as one).
func FuzzStrictJSON(f *testing.F) {
	for _, s := range []string{`{"key":"a","hits":2}`, `{"key":"\ud800"}`, `{"key":"a","key":"b"}`, `{"KEY":"a"}`, `{"key":"\\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if strictJSON(b).status != 0 || !utf8.Valid(b) {
			return
		}
		ps, p := parseJSON(b)
		if p.status != 0 {
			return
		}
		if strings.ContainsRune(ps.key, utf8.RuneError) && !strings.Contains(string(b), `\ufffd`) && !strings.Contains(string(b), `\uFFFD`) && !strings.ContainsRune(string(b), utf8.RuneError) {
			t.Fatalf("%q: key %q has a U+FFFD the body did not spell", b, ps.key)
		}
	})
}
