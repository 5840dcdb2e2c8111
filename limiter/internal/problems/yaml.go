package problems

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/internal/yamlnode"
)

// Document decodes data, which must hold one YAML document, and returns
// it. When it holds none it adds the problem empty; at a syntax error,
// "invalid YAML" at the line yaml names; when it holds a second document,
// the problem second at that document's first line; and returns nil.
func (p *List) Document(data []byte, empty, second string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.Add(0, "%s", empty)
		} else {
			p.yamlError(err)
		}
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		// At its content, past the "---" that may start it.
		if len(extra.Content) > 0 {
			extra.Line = extra.Content[0].Line
		}
		p.Add(extra.Line, "%s", second)
		return nil
	case !errors.Is(err, io.EOF):
		p.yamlError(err)
		return nil
	}
	return &doc
}

// yamlError adds a YAML syntax error at the line yaml names, if any, in
// the same "source:line:" form as every other problem.
func (p *List) yamlError(err error) {
	line, msg := yamlnode.SyntaxError(err)
	p.Add(line, "invalid YAML: %s", msg)
}
