package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
)

// The access log of limitsim replay --rules: "TIME KEY [NODE]" per line,
// where TIME is either integer milliseconds, as in a trace, or an RFC 3339
// timestamp, as a proxy or a web server writes it. It has its own reader
// rather than a mode of Reader because its times need state (the first
// line's instant, the format of the log) and because a plain replay must
// keep rejecting what it always rejected.

// timeFormat is how a log writes its times; one log uses one.
type timeFormat int

const (
	formatUnknown timeFormat = iota // no line read yet
	formatMillis                    // decimal milliseconds on the simulated clock
	formatRFC3339                   // RFC 3339, made relative to the first line
)

func (f timeFormat) String() string {
	if f == formatRFC3339 {
		return "an RFC 3339 timestamp"
	}
	return "milliseconds"
}

// logTime is one parsed TIME field.
type logTime struct {
	format timeFormat
	ms     int64     // formatMillis: the value
	t      time.Time // formatRFC3339: the instant
}

// parseLogTime parses a TIME field: a decimal integer of milliseconds in
// [0, 2^53-1], or an RFC 3339 date-time ("2026-07-28T09:00:00Z", with
// optional fractional seconds and a "Z" or "+hh:mm" offset).
func parseLogTime(b []byte) (logTime, error) {
	if decimal(b) {
		ms, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || ms > MaxTimeMs {
			return logTime{}, fmt.Errorf("time %q is above the largest allowed, %d", b, int64(MaxTimeMs))
		}
		return logTime{format: formatMillis, ms: ms}, nil
	}
	// RFC3339Nano parses both with and without fractional seconds.
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return logTime{}, fmt.Errorf("time %q is neither milliseconds nor an RFC 3339 timestamp (like 2026-07-28T09:00:00.250Z)", truncateField(b))
	}
	return logTime{format: formatRFC3339, t: t}, nil
}

// truncateField shortens a field for an error message.
func truncateField(b []byte) string {
	const n = 64
	if len(b) <= n {
		return string(b)
	}
	i := n
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return string(b[:i]) + "..."
}

// LogLine is one request of an access log.
type LogLine struct {
	At   int64  // ms on the simulated clock: the value, or ms since the first line's instant
	Time []byte // the TIME field as written; valid until the next call of Next
	Key  string
	Node int // the NODE field, -1 without one
}

// AccessLogReader reads an access log. Lines that are blank or whose first
// non-blank character is # are skipped; fields are separated by spaces or
// tabs; a trailing \r is ignored. Every TIME uses the format of the first
// line and none is before the previous line's (RFC 3339 times are compared
// as instants, so offsets may differ). KEY is what limiter.Check accepts:
// valid UTF-8 of at most limiter.MaxKeyBytes bytes. NODE, allowed only with
// nodes > 0, is an index in [0, nodes).
type AccessLogReader struct {
	sc     *bufio.Scanner
	line   int // of the last line read, 1-based
	nodes  int
	format timeFormat
	first  time.Time // RFC 3339: the first line's instant
	last   logTime
}

// NewAccessLogReader reads the log from r, for a cluster of nodes nodes
// (0: one node, no NODE field).
func NewAccessLogReader(r io.Reader, nodes int) *AccessLogReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	return &AccessLogReader{sc: sc, nodes: nodes}
}

// Line is the number of the line Next read last, 1-based.
func (lr *AccessLogReader) Line() int { return lr.line }

// Next returns the next request, io.EOF after the last, or a *LineError
// naming the offending line (or another error from the underlying reader).
func (lr *AccessLogReader) Next() (LogLine, error) {
	for lr.sc.Scan() {
		lr.line++
		b := bytes.TrimSpace(lr.sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		l, err := lr.parse(b)
		if err != nil {
			return LogLine{}, &LineError{Line: lr.line, Msg: err.Error()}
		}
		return l, nil
	}
	if err := lr.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return LogLine{}, &LineError{Line: lr.line + 1, Msg: fmt.Sprintf("longer than %d bytes", MaxLineBytes)}
		}
		return LogLine{}, fmt.Errorf("reading the log after line %d: %w", lr.line, err)
	}
	return LogLine{}, io.EOF
}

// parse parses one trimmed, non-blank, non-comment line and checks it
// against the lines before.
func (lr *AccessLogReader) parse(b []byte) (LogLine, error) {
	f := bytes.Fields(b)
	switch {
	case lr.nodes == 0 && len(f) != 2:
		return LogLine{}, fmt.Errorf("want \"TIME KEY\", got %d fields", len(f))
	case lr.nodes > 0 && len(f) != 2 && len(f) != 3:
		return LogLine{}, fmt.Errorf("want \"TIME KEY [NODE]\", got %d fields", len(f))
	}
	lt, err := parseLogTime(f[0])
	if err != nil {
		return LogLine{}, err
	}
	key := f[1]
	switch {
	case !utf8.Valid(key):
		return LogLine{}, fmt.Errorf("key %q is not valid UTF-8", truncateField(key))
	case len(key) > limiter.MaxKeyBytes:
		return LogLine{}, fmt.Errorf("key is %d bytes, more than the %d a key may have", len(key), limiter.MaxKeyBytes)
	}
	l := LogLine{Time: f[0], Key: string(key), Node: -1}
	if len(f) == 3 {
		n, err := strconv.Atoi(string(f[2]))
		if !decimal(f[2]) || err != nil || n >= lr.nodes {
			return LogLine{}, fmt.Errorf("node %q is not a node index in [0, %d)", truncateField(f[2]), lr.nodes)
		}
		l.Node = n
	}
	if lr.format == formatUnknown {
		lr.format, lr.first, lr.last = lt.format, lt.t, lt
	}
	if lt.format != lr.format {
		return LogLine{}, fmt.Errorf("time %q is %v, but the log's first line has %v: a log uses one format", truncateField(f[0]), lt.format, lr.format)
	}
	switch lt.format {
	case formatMillis:
		if lt.ms < lr.last.ms {
			return LogLine{}, fmt.Errorf("time %d is before the previous line's %d", lt.ms, lr.last.ms)
		}
		l.At = lt.ms
	default:
		if lt.t.Before(lr.last.t) {
			return LogLine{}, fmt.Errorf("time %s is before the previous line's %s", f[0], lr.last.t.Format(time.RFC3339Nano))
		}
		d := lt.t.Sub(lr.first)
		if d == math.MaxInt64 {
			return LogLine{}, fmt.Errorf("time %s is more than 292 years after the first line's", f[0])
		}
		// Truncated to the counter's resolution, 1 ms; d >= 0, so this is
		// the floor and keeps the order of the lines.
		l.At = d.Milliseconds()
	}
	lr.last = lt
	return l, nil
}
