package problems

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

var errTest = errors.New("test: invalid")

func TestErr(t *testing.T) {
	for _, tc := range []struct {
		name string
		list List
		add  func(*List)
		want string // "" for no error
	}{
		{"none", List{Source: "a.yaml"}, func(*List) {}, ""},
		{"one", List{Source: "a.yaml"}, func(l *List) { l.Add(3, "bad %s", "x") }, "test: invalid: a.yaml:3: bad x"},
		{"no line", List{Source: "a.yaml"}, func(l *List) { l.Add(0, "empty") }, "test: invalid: a.yaml: empty"},
		{"unnamed source", List{Unnamed: "rules"}, func(l *List) { l.Add(2, "bad") }, "test: invalid: rules:2: bad"},
		{"in line order", List{Source: "a.yaml"}, func(l *List) { l.Add(9, "late"); l.Add(2, "early") },
			"test: invalid: 2 problems:\n  a.yaml:2: early\n  a.yaml:9: late"},
		{"files in rank order, then lines", List{Source: "a.yaml, b.yaml"}, func(l *List) {
			l.AddIn("b.yaml", 1, 1, "second file")
			l.AddIn("a.yaml", 0, 5, "first file")
		}, "test: invalid: 2 problems:\n  a.yaml:5: first file\n  b.yaml:1: second file"},
		{"shown cut", List{Source: "a.yaml", Shown: 2}, func(l *List) {
			for i := range 5 {
				l.Add(i+1, "p%d", i+1)
			}
		}, "test: invalid: 5 problems:\n  a.yaml:1: p1\n  a.yaml:2: p2\n  ... and 3 more"},
		{"counted past what is kept", List{Source: "a.yaml", Shown: 1}, func(l *List) {
			for range maxCollected + 7 {
				l.Add(1, "p")
			}
		}, fmt.Sprintf("test: invalid: %d problems:\n  a.yaml:1: p\n  ... and %d more", maxCollected+7, maxCollected+6)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.list
			l.Sentinel = errTest
			tc.add(&l)
			err := l.Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Err() = %v, want nil", err)
			case tc.want == "":
			case err == nil || err.Error() != tc.want || !errors.Is(err, errTest):
				t.Fatalf("Err() = %v\nwant %s (wrapping the sentinel)", err, strings.ReplaceAll(tc.want, "\n", "\n     "))
			}
		})
	}
}

func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // "" when the document is returned
	}{
		{"one document", "a: 1\n", ""},
		{"one document after its marker", "---\na: 1\n", ""},
		{"empty", "", "test: invalid: f.yaml: nothing"},
		{"syntax error", "a: [1\n", "test: invalid: f.yaml:1: invalid YAML: "},
		{"a second document, at its content", "a: 1\n---\nb: 2\n", "test: invalid: f.yaml:3: two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := List{Source: "f.yaml", Sentinel: errTest}
			doc := l.Document([]byte(tc.data), "nothing", "two")
			err := l.Err()
			if tc.want == "" {
				if doc == nil || err != nil {
					t.Fatalf("Document = %v, %v; want the document", doc, err)
				}
				return
			}
			if doc != nil || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Document = %v, %v; want nil and %q", doc, err, tc.want)
			}
		})
	}
}
