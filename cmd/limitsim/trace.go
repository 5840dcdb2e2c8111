package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// maxTraceMs is the latest instant a trace may name: 2^53-1 ms, the largest
// integer a JavaScript tool writing traces represents exactly (about
// 285,000 years), and far from int64 overflow in window arithmetic.
const maxTraceMs = 1<<53 - 1

// maxTraceLine is the longest trace line, in bytes.
const maxTraceLine = 64 << 10

// request is one line of a trace.
type request struct {
	at  int64 // ms since the Unix epoch on the simulated clock
	key string
}

// traceError is a malformed trace line.
type traceError struct {
	line int // 1-based
	msg  string
}

func (e *traceError) Error() string { return fmt.Sprintf("trace line %d: %s", e.line, e.msg) }

// traceReader reads a trace: one request per line, "TIME_MS KEY", fields
// separated by spaces or tabs. TIME_MS is a decimal integer in [0, 2^53-1],
// never smaller than the previous line's; KEY is valid UTF-8 without
// whitespace. Lines that are blank or whose first non-blank character is #
// are skipped; a trailing \r is ignored.
//
// With nodes > 0 (a simulated cluster) a line may carry a third field,
// "TIME_MS KEY NODE", NODE a decimal node index in [0, nodes); node then
// holds it after next, or -1 for a line without it.
type traceReader struct {
	sc    *bufio.Scanner
	line  int
	last  int64
	nodes int
	node  int
}

func newTraceReader(r io.Reader) *traceReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTraceLine)
	return &traceReader{sc: sc}
}

// next returns the next request, io.EOF after the last, or a *traceError
// naming the offending line (or another error from the underlying reader).
func (tr *traceReader) next() (request, error) {
	for tr.sc.Scan() {
		tr.line++
		b := bytes.TrimSpace(tr.sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		r, node, err := parseTraceLine(b, tr.nodes)
		if err != nil {
			return request{}, &traceError{line: tr.line, msg: err.Error()}
		}
		if r.at < tr.last {
			return request{}, &traceError{line: tr.line, msg: fmt.Sprintf("time %d is before the previous line's %d", r.at, tr.last)}
		}
		tr.last, tr.node = r.at, node
		return r, nil
	}
	if err := tr.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return request{}, &traceError{line: tr.line + 1, msg: fmt.Sprintf("longer than %d bytes", maxTraceLine)}
		}
		return request{}, fmt.Errorf("reading trace after line %d: %w", tr.line, err)
	}
	return request{}, io.EOF
}

// parseTraceLine parses one trimmed, non-blank, non-comment line. With
// nodes > 0 it also takes an optional NODE field; node is -1 without one.
func parseTraceLine(b []byte, nodes int) (r request, node int, err error) {
	f := bytes.Fields(b)
	switch {
	case nodes == 0 && len(f) != 2:
		return request{}, -1, fmt.Errorf("want \"TIME_MS KEY\", got %d fields", len(f))
	case nodes > 0 && len(f) != 2 && len(f) != 3:
		return request{}, -1, fmt.Errorf("want \"TIME_MS KEY [NODE]\", got %d fields", len(f))
	}
	ts, key := f[0], f[1]
	if !decimal(ts) {
		return request{}, -1, fmt.Errorf("time %q is not a non-negative decimal integer", ts)
	}
	at, err := strconv.ParseInt(string(ts), 10, 64)
	if err != nil || at > maxTraceMs {
		return request{}, -1, fmt.Errorf("time %q is above the largest allowed, %d", ts, int64(maxTraceMs))
	}
	if !utf8.Valid(key) {
		return request{}, -1, fmt.Errorf("key %q is not valid UTF-8", key)
	}
	node = -1
	if len(f) == 3 {
		n, err := strconv.Atoi(string(f[2]))
		if !decimal(f[2]) || err != nil || n >= nodes {
			return request{}, -1, fmt.Errorf("node %q is not a node index in [0, %d)", f[2], nodes)
		}
		node = n
	}
	return request{at: at, key: string(key)}, node, nil
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
