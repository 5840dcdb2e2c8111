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
type traceReader struct {
	sc   *bufio.Scanner
	line int
	last int64
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
		r, err := parseTraceLine(b)
		if err != nil {
			return request{}, &traceError{line: tr.line, msg: err.Error()}
		}
		if r.at < tr.last {
			return request{}, &traceError{line: tr.line, msg: fmt.Sprintf("time %d is before the previous line's %d", r.at, tr.last)}
		}
		tr.last = r.at
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

// parseTraceLine parses one trimmed, non-blank, non-comment line.
func parseTraceLine(b []byte) (request, error) {
	f := bytes.Fields(b)
	if len(f) != 2 {
		return request{}, fmt.Errorf("want \"TIME_MS KEY\", got %d fields", len(f))
	}
	ts, key := f[0], f[1]
	for _, c := range ts {
		if c < '0' || c > '9' {
			return request{}, fmt.Errorf("time %q is not a non-negative decimal integer", ts)
		}
	}
	at, err := strconv.ParseInt(string(ts), 10, 64)
	if err != nil || at > maxTraceMs {
		return request{}, fmt.Errorf("time %q is above the largest allowed, %d", ts, int64(maxTraceMs))
	}
	if !utf8.Valid(key) {
		return request{}, fmt.Errorf("key %q is not valid UTF-8", key)
	}
	return request{at: at, key: string(key)}, nil
}
