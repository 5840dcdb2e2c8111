package problems

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxCollected bounds memory for a file that is wrong everywhere.
const maxCollected = 1000

// List collects problems. Set its fields before the first Err.
type List struct {
	// Source names the file the problems are in unless they name another
	// (AddIn); Unnamed stands for it when it is empty.
	Source, Unnamed string
	// Sentinel is what Err's error wraps.
	Sentinel error
	// Shown bounds how many problems Err's message lists; a file that is
	// wrong in hundreds of places needs its first few fixed, not a wall of
	// text. The rest are counted. 0: all.
	Shown int

	list []problem
	more int // problems dropped past maxCollected
}

type problem struct {
	source string // "" for List.Source
	rank   int    // the file's position among merged ones: messages follow it
	line   int
	msg    string
}

// Add records one problem at line (0 when no line applies) of Source.
func (p *List) Add(line int, format string, args ...any) {
	p.AddIn("", 0, line, format, args...)
}

// AddIn records one problem at line of source, the rank-th of the files
// merged ("" and 0 for Source).
func (p *List) AddIn(source string, rank, line int, format string, args ...any) {
	if len(p.list) == maxCollected {
		p.more++
		return
	}
	p.list = append(p.list, problem{source, rank, line, fmt.Sprintf(format, args...)})
}

// Err returns nil, the single problem, or the first Shown of them in file
// and line order, one per line, in an error wrapping Sentinel.
func (p *List) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	// Checks run field by field and then across rules; reading the result
	// top to bottom is easier when it follows the files.
	slices.SortStableFunc(p.list, func(a, b problem) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.line, b.line))
	})
	shown := p.list
	if p.Shown > 0 {
		shown = shown[:min(len(shown), p.Shown)]
	}
	msgs := make([]string, len(shown))
	for i, pr := range shown {
		pos := cmp.Or(pr.source, p.Source, p.Unnamed)
		if pr.line > 0 {
			pos += ":" + strconv.Itoa(pr.line)
		}
		msgs[i] = pos + ": " + pr.msg
	}
	if len(p.list) == 1 {
		return fmt.Errorf("%w: %s", p.Sentinel, msgs[0])
	}
	total := len(p.list) + p.more
	msg := strings.Join(msgs, "\n  ")
	if total > len(msgs) {
		msg += fmt.Sprintf("\n  ... and %d more", total-len(msgs))
	}
	return fmt.Errorf("%w: %d problems:\n  %s", p.Sentinel, total, msg)
}
