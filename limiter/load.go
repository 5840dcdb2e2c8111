package limiter

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
)

// Files is the content of rule files as read at one instant: limiterd's
// YAML and envoyproxy/ratelimit files side by side, in the order given.
type Files struct {
	Paths []string
	Data  [][]byte // Data[i] is the content of Paths[i]
	// Sum is a SHA-256 of every file's name and content: equal sums mean
	// files that parse alike, so a reloader can tell a file event that
	// changed nothing from an edit.
	Sum [sha256.Size]byte
}

// ReadFiles reads the rule files at paths. An error reading one does not
// wrap ErrInvalidRules (the rules were never seen), so a caller can tell a
// missing file (errors.Is(err, fs.ErrNotExist)) from a bad one.
func ReadFiles(paths ...string) (Files, error) {
	if len(paths) == 0 {
		return Files{}, errors.New("limiter: read rules: no rule file")
	}
	f := Files{Paths: paths, Data: make([][]byte, len(paths))}
	h := sha256.New()
	for i, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return Files{}, fmt.Errorf("limiter: read rules: %w", err)
		}
		fmt.Fprintf(h, "%d:%d:%s:", len(path), len(b), path)
		h.Write(b)
		f.Data[i] = b
	}
	copy(f.Sum[:], h.Sum(nil))
	return f, nil
}

// Parse parses each file with Parse (which tells limiterd's YAML from an
// Envoy file) and merges them into one rule set with Merge; every file's
// problems are reported, in one error that wraps ErrInvalidRules.
func (f Files) Parse() (*RuleSet, error) {
	sets := make([]*RuleSet, 0, len(f.Paths))
	var errs []error
	for i, path := range f.Paths {
		rs, err := Parse(path, f.Data[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sets = append(sets, rs)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(sets) == 1 {
		return sets[0], nil
	}
	return Merge(sets...)
}

// Load reads and parses the rule files at paths, one or more side by side:
// ReadFiles, then Files.Parse.
func Load(paths ...string) (*RuleSet, error) {
	f, err := ReadFiles(paths...)
	if err != nil {
		return nil, err
	}
	return f.Parse()
}
