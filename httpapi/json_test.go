package httpapi

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppendJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\n\r\t", `"\n\r\t"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"\x7f", "\"\x7f\""}, // DEL is legal in a JSON string
		{"é😀", `"é😀"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"a\xffb", `"a\ufffdb"`},
		{"\xc3\x28", `"\ufffd("`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // an encoded surrogate is invalid UTF-8
		{"<&>", `"<&>"`},
	} {
		if got := string(appendJSONString(nil, tc.in)); got != tc.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzAppendJSONString checks the escaper against encoding/json: the output
// is a valid JSON string that decodes to what encoding/json's own encoding
// decodes to (the input, with invalid bytes as U+FFFD).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00", "\xff\xfe", "é\u2028", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, s)
		if !utf8.Valid(out) {
			t.Fatalf("output %q is not UTF-8", out)
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %q for %q is not a JSON string: %v", out, s, err)
		}
		ref, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", s, got, want)
		}
	})
}
