package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// MaxTimeMs is the latest instant a trace may name: 2^53-1 ms, the largest
// integer a JavaScript tool writing traces represents exactly (about
// 285,000 years), and far from int64 overflow in window arithmetic.
const MaxTimeMs = 1<<53 - 1

// MaxLineBytes is the longest trace or log line, in bytes.
const MaxLineBytes = 64 << 10

// Request is one line of a trace.
type Request struct {
	At  int64 // ms since the Unix epoch on the simulated clock
	Key string
}

// LineError is a malformed line of a trace or an access log.
type LineError struct {
	Line int // 1-based
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("trace line %d: %s", e.Line, e.Msg) }

// Reader reads a trace: one request per line, "TIME_MS KEY", fields
// separated by spaces or tabs. TIME_MS is a decimal integer in [0, 2^53-1],
// never smaller than the previous line's; KEY is valid UTF-8 without
// whitespace. Lines that are blank or whose first non-blank character is #
// are skipped; a trailing \r is ignored.
//
// With nodes > 0 (a simulated cluster) a line may carry a third field,
// "TIME_MS KEY NODE", NODE a decimal node index in [0, nodes); Node then
// returns it after Next, or -1 for a line without it.
type Reader struct {
	sc    *bufio.Scanner
	line  int
	last  int64
	nodes int
	node  int
}

// NewReader reads the trace from r, for a cluster of nodes nodes (0: one
// node, no NODE field).
func NewReader(r io.Reader, nodes int) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	return &Reader{sc: sc, nodes: nodes}
}

// Line is the number of the line Next read last, 1-based.
func (tr *Reader) Line() int { return tr.line }

// Node is the NODE field of the line Next read last, -1 without one.
func (tr *Reader) Node() int { return tr.node }

// Next returns the next request, io.EOF after the last, or a *LineError
// naming the offending line (or another error from the underlying reader).
func (tr *Reader) Next() (Request, error) {
	for tr.sc.Scan() {
		tr.line++
		b := bytes.TrimSpace(tr.sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		r, node, err := parseTraceLine(b, tr.nodes)
		if err != nil {
			return Request{}, &LineError{Line: tr.line, Msg: err.Error()}
		}
		if r.At < tr.last {
			return Request{}, &LineError{Line: tr.line, Msg: fmt.Sprintf("time %d is before the previous line's %d", r.At, tr.last)}
		}
		tr.last, tr.node = r.At, node
		return r, nil
	}
	if err := tr.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Request{}, &LineError{Line: tr.line + 1, Msg: fmt.Sprintf("longer than %d bytes", MaxLineBytes)}
		}
		return Request{}, fmt.Errorf("reading trace after line %d: %w", tr.line, err)
	}
	return Request{}, io.EOF
}

// parseTraceLine parses one trimmed, non-blank, non-comment line. With
// nodes > 0 it also takes an optional NODE field; node is -1 without one.
func parseTraceLine(b []byte, nodes int) (r Request, node int, err error) {
	f := bytes.Fields(b)
	switch {
	case nodes == 0 && len(f) != 2:
		return Request{}, -1, fmt.Errorf("want \"TIME_MS KEY\", got %d fields", len(f))
	case nodes > 0 && len(f) != 2 && len(f) != 3:
		return Request{}, -1, fmt.Errorf("want \"TIME_MS KEY [NODE]\", got %d fields", len(f))
	}
	ts, key := f[0], f[1]
	if !decimal(ts) {
		return Request{}, -1, fmt.Errorf("time %q is not a non-negative decimal integer", ts)
	}
	at, err := strconv.ParseInt(string(ts), 10, 64)
	if err != nil || at > MaxTimeMs {
		return Request{}, -1, fmt.Errorf("time %q is above the largest allowed, %d", ts, int64(MaxTimeMs))
	}
	if !utf8.Valid(key) {
		return Request{}, -1, fmt.Errorf("key %q is not valid UTF-8", key)
	}
	node = -1
	if len(f) == 3 {
		n, err := strconv.Atoi(string(f[2]))
		if !decimal(f[2]) || err != nil || n >= nodes {
			return Request{}, -1, fmt.Errorf("node %q is not a node index in [0, %d)", f[2], nodes)
		}
		node = n
	}
	return Request{At: at, Key: string(key)}, node, nil
}

// decimal reports whether b is a non-empty run of ASCII digits.
func decimal(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
