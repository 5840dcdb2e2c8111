package limiter

import (
	"fmt"
	"strings"
)

// Merge combines rule sets read from several files (our rule files and
// Envoy files side by side, as several -rules flags give) into one: the
// rules of each in order, one set after the other, so matching tries the
// first file's patterns first; the Envoy configs likewise; Source the
// sources joined with ", ". The result is validated as a whole, which the
// sets alone cannot be: a rule name used in two files, two default rules,
// a pattern that repeats one of an earlier file, two Envoy files with the
// same domain (upstream refuses that too). Each problem names the file and
// line of both sides; the error wraps ErrInvalidRules. The sets are not
// modified and may be merged again; a merged set merges as its files.
func Merge(sets ...*RuleSet) (*RuleSet, error) {
	if len(sets) == 0 {
		return nil, fmt.Errorf("%w: no rule sets to merge", ErrInvalidRules)
	}
	out := &RuleSet{} // its slices are new: appending copies the sets' rules
	sources := make([]string, 0, len(sets))
	for i, s := range sets {
		if s == nil {
			return nil, fmt.Errorf("%w: rule set %d of %d to merge is nil", ErrInvalidRules, i+1, len(sets))
		}
		sources = append(sources, s.Source)
		out.Rules = append(out.Rules, s.Rules...)
		out.Envoy = append(out.Envoy, s.Envoy...)
		if files, ok := s.spans(); ok {
			out.files = append(out.files, files...)
		} else {
			out.files = append(out.files, fileSpan{source: s.Source, rules: len(s.Rules), envoy: len(s.Envoy)})
		}
	}
	out.Source = strings.Join(sources, ", ")
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// spans returns the files of a set built by Merge, when they account for
// all of its rules and configs.
func (rs *RuleSet) spans() ([]fileSpan, bool) {
	if len(rs.files) == 0 {
		return nil, false
	}
	nr, ne := 0, 0
	for _, f := range rs.files {
		nr, ne = nr+f.rules, ne+f.envoy
	}
	return rs.files, nr == len(rs.Rules) && ne == len(rs.Envoy)
}
