// Package svgtest reads back what svgchart writes, for the tests of every
// package that draws charts with it: Parse checks that a chart is
// well-formed SVG and returns its elements, Find picks some of them.
package svgtest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"testing"
)

// Element is what the structural tests read of an SVG: one element with
// its attributes and text, in document order.
type Element struct {
	Name  string
	Attrs map[string]string
	Text  string
}

// Parse checks that b is well-formed XML with one <svg> root in the SVG
// namespace carrying a viewBox, and returns its elements in document order
// (nested <svg> elements included); it fails t otherwise.
func Parse(t testing.TB, b []byte) []Element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var (
		els   []Element
		stack []int
		depth int
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if depth == 0 && (tk.Name.Local != "svg" || tk.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v, want svg in the SVG namespace", tk.Name)
			}
			e := Element{Name: tk.Name.Local, Attrs: map[string]string{}}
			for _, a := range tk.Attr {
				e.Attrs[a.Name.Local] = a.Value
			}
			els = append(els, e)
			stack = append(stack, len(els)-1)
			depth++
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			depth--
		case xml.CharData:
			if len(stack) > 0 {
				els[stack[len(stack)-1]].Text += string(tk)
			}
		}
	}
	if len(els) == 0 || els[0].Attrs["viewBox"] == "" {
		t.Fatal("no <svg viewBox=...> root")
	}
	return els
}

// Find returns the elements named name whose attribute key is value (any
// value for key "").
func Find(els []Element, name, key, value string) []Element {
	var out []Element
	for _, e := range els {
		if e.Name == name && (key == "" || e.Attrs[key] == value) {
			out = append(out, e)
		}
	}
	return out
}
