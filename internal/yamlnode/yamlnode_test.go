package yamlnode

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestHelpers(t *testing.T) {
	if line, msg := SyntaxError(errors.New("yaml: line 7: did not find expected key")); line != 7 || msg != "did not find expected key" {
		t.Errorf("SyntaxError: %d %q", line, msg)
	}
	if line, msg := SyntaxError(errors.New("yaml: control characters are not allowed")); line != 0 || msg != "control characters are not allowed" {
		t.Errorf("SyntaxError without a line: %d %q", line, msg)
	}
	if got := Truncate(strings.Repeat("é", 40)); !strings.HasSuffix(got, "...") || len(got) > 67 || !strings.HasPrefix(got, "é") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("Truncate cut inside a rune or too long: %q", got)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: &x {b: 1}\nc: *x\nd: ~\ne: text\nf: [1]\n"), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	for _, tc := range []struct {
		i    int
		want string
	}{{3, "a mapping"}, {5, "nothing"}, {7, `"text"`}, {9, "a list"}} {
		if got := Describe(Deref(m.Content[tc.i])); got != tc.want {
			t.Errorf("Describe of value %d: %q, want %q", tc.i, got, tc.want)
		}
	}
	if !IsNull(m.Content[5]) || IsNull(m.Content[7]) {
		t.Error("IsNull")
	}
}
