package replay

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
)

func TestParseLogTime(t *testing.T) {
	tests := []struct {
		in     string
		format timeFormat
		ms     int64
		unix   int64 // formatRFC3339: the instant, in ns since the epoch
		err    string
	}{
		{in: "0", format: formatMillis, ms: 0},
		{in: "0042", format: formatMillis, ms: 42},
		{in: "9007199254740991", format: formatMillis, ms: MaxTimeMs},
		{in: "9007199254740992", err: "above the largest allowed"},
		{in: "99999999999999999999", err: "above the largest allowed"},
		{in: "2026-07-28T09:00:00Z", format: formatRFC3339, unix: 1785229200 * 1e9},
		{in: "2026-07-28T09:00:00.250Z", format: formatRFC3339, unix: 1785229200*1e9 + 250e6},
		{in: "2026-07-28T09:00:00.000000001Z", format: formatRFC3339, unix: 1785229200*1e9 + 1},
		{in: "2026-07-28T11:00:00.5+02:00", format: formatRFC3339, unix: 1785229200*1e9 + 500e6},
		{in: "2026-07-28T04:30:00-04:30", format: formatRFC3339, unix: 1785229200 * 1e9},
		{in: "-5", err: "neither milliseconds nor an RFC 3339 timestamp"},
		{in: "1.5", err: "neither"},
		{in: "2026-07-28", err: "neither"},
		{in: "2026-07-28T09:00:00", err: "neither"}, // no offset
		{in: "2026-13-28T09:00:00Z", err: "neither"},
		{in: "2026-07-28T25:00:00Z", err: "neither"},
		{in: "28/Jul/2026:09:00:00", err: "neither"},
	}
	for _, tt := range tests {
		got, err := parseLogTime([]byte(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseLogTime(%q) error %v, want one containing %q", tt.in, err, tt.err)
			}
			continue
		}
		switch {
		case err != nil:
			t.Errorf("parseLogTime(%q): %v", tt.in, err)
		case got.format != tt.format:
			t.Errorf("parseLogTime(%q) format %v, want %v", tt.in, got.format, tt.format)
		case tt.format == formatMillis && got.ms != tt.ms:
			t.Errorf("parseLogTime(%q) = %d ms, want %d", tt.in, got.ms, tt.ms)
		case tt.format == formatRFC3339 && got.t.UnixNano() != tt.unix:
			t.Errorf("parseLogTime(%q) = %v (%d ns), want %d ns", tt.in, got.t, got.t.UnixNano(), tt.unix)
		}
	}
}

// readLog reads a whole log and returns each request's "at key node", or
// the error.
func readLog(in string, nodes int) ([]string, error) {
	lr := NewAccessLogReader(strings.NewReader(in), nodes)
	var out []string
	for {
		l, err := lr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, strconv.FormatInt(l.At, 10)+" "+l.Key+" "+strconv.Itoa(l.Node))
	}
}

func TestAccessLogReader(t *testing.T) {
	long := strings.Repeat("k", limiter.MaxKeyBytes+1)
	tests := []struct {
		name  string
		in    string
		nodes int
		want  string // requests joined by "|"
		err   string // the error, naming its line
	}{
		{name: "millis as written", in: "100 a\n100 b\n250 a\n", want: "100 a -1|100 b -1|250 a -1"},
		{name: "rfc3339 relative to the first line", in: "2026-07-28T09:00:00.100Z a\n2026-07-28T09:00:01Z b\n2026-07-28T09:01:00.000Z a\n",
			want: "0 a -1|900 b -1|59900 a -1"},
		{name: "offsets compared as instants", in: "2026-07-28T09:00:00Z a\n2026-07-28T11:00:00.5+02:00 a\n", want: "0 a -1|500 a -1"},
		{name: "sub-millisecond truncated", in: "2026-07-28T09:00:00.0009Z a\n2026-07-28T09:00:00.0018Z a\n2026-07-28T09:00:00.0021Z a\n",
			want: "0 a -1|0 a -1|1 a -1"},
		{name: "comments blank lines CRLF tabs", in: "# header\r\n\r\n  2026-07-28T09:00:00Z\tk1\r\n   # note\n2026-07-28T09:00:00Z k2\n", want: "0 k1 -1|0 k2 -1"},
		{name: "node field", in: "0 a 3\n5 b\n", nodes: 4, want: "0 a 3|5 b -1"},
		{name: "empty", in: "", want: ""},
		{name: "earlier rfc3339", in: "2026-07-28T09:00:01Z a\n2026-07-28T09:00:00.999Z a\n", err: "trace line 2: time 2026-07-28T09:00:00.999Z is before the previous line's 2026-07-28T09:00:01Z"},
		{name: "earlier by less than a ms", in: "2026-07-28T09:00:00.0005Z a\n2026-07-28T09:00:00.0004Z a\n", err: "trace line 2: time"},
		{name: "earlier millis", in: "# c\n10 a\n9 a\n", err: "trace line 3: time 9 is before the previous line's 10"},
		{name: "mixed formats", in: "0 a\n2026-07-28T09:00:00Z a\n", err: "trace line 2: time \"2026-07-28T09:00:00Z\" is an RFC 3339 timestamp, but the log's first line has milliseconds"},
		{name: "mixed formats other way", in: "2026-07-28T09:00:00Z a\n5 a\n", err: "trace line 2: time \"5\" is milliseconds, but the log's first line has an RFC 3339 timestamp"},
		{name: "bad time", in: "0 a\nyesterday a\n", err: "trace line 2: time \"yesterday\" is neither"},
		{name: "one field", in: "0\n", err: "trace line 1: want \"TIME KEY\", got 1 fields"},
		{name: "node without nodes", in: "0 a 1\n", err: "trace line 1: want \"TIME KEY\", got 3 fields"},
		{name: "four fields", in: "0 a 1 x\n", nodes: 2, err: "trace line 1: want \"TIME KEY [NODE]\", got 4 fields"},
		{name: "node out of range", in: "0 a 2\n", nodes: 2, err: "trace line 1: node \"2\" is not a node index in [0, 2)"},
		{name: "node not a number", in: "0 a -1\n", nodes: 2, err: "trace line 1: node \"-1\""},
		{name: "invalid utf-8", in: "0 a\xff\n", err: "trace line 1: key \"a\\xff\" is not valid UTF-8"},
		{name: "key too long", in: "0 " + long + "\n", err: "trace line 1: key is 1025 bytes"},
		{name: "line too long", in: "0 a\n0 " + strings.Repeat("x", MaxLineBytes) + "\n", err: "trace line 2: longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readLog(tt.in, tt.nodes)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				var te *LineError
				if !errors.As(err, &te) {
					t.Errorf("error %T is not a *traceError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(got, "|"); s != tt.want {
				t.Errorf("read %q, want %q", s, tt.want)
			}
		})
	}
}

// FuzzParseLogTime checks parseLogTime on any field: it never panics, a
// field it accepts as milliseconds is a decimal integer in range, and an
// instant it accepts survives formatting and parsing again.
func FuzzParseLogTime(f *testing.F) {
	for _, s := range []string{"0", "0042", "9007199254740991", "9007199254740992", "2026-07-28T09:00:00Z",
		"2026-07-28T09:00:00.250Z", "2026-07-28T11:00:00.5+02:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999-23:59",
		"2026-07-28t09:00:00z", "2026-07-28T09:00:00,5Z", "", "-1", "1e3", "2026-07-28T24:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lt, err := parseLogTime([]byte(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "time ") {
				t.Errorf("error %q does not name the time", err)
			}
			return
		}
		switch lt.format {
		case formatMillis:
			n, perr := strconv.ParseInt(s, 10, 64)
			if perr != nil || n != lt.ms || n < 0 || n > MaxTimeMs || !decimal([]byte(s)) {
				t.Errorf("%q accepted as %d ms", s, lt.ms)
			}
		case formatRFC3339:
			back, perr := time.Parse(time.RFC3339Nano, lt.t.Format(time.RFC3339Nano))
			if perr != nil || !back.Equal(lt.t) {
				t.Errorf("%q parsed as %v, which does not survive a round trip (%v)", s, lt.t, perr)
			}
		default:
			t.Errorf("%q accepted with no format", s)
		}
	})
}

// FuzzAccessLog checks the reader on any input: it never panics, every
// error names a line, and what it returns is ordered, non-negative and
// within range, with keys limiter.Check accepts.
func FuzzAccessLog(f *testing.F) {
	f.Add("0 a\n5 b 1\n", 2)
	f.Add("2026-07-28T09:00:00Z a\n2026-07-28T09:00:00.0005Z b\n2026-07-28T10:00:00+01:00 c 0\n", 1)
	f.Add("# c\n\n2026-07-28T09:00:01Z a\n2026-07-28T09:00:00Z a\n", 0)
	f.Add("0 a\n2026-07-28T09:00:00Z a\n", 0)
	f.Add("0001-01-01T00:00:00Z a\n9999-12-31T23:59:59Z b\n", 0)
	f.Fuzz(func(t *testing.T, in string, nodes int) {
		nodes = max(0, min(nodes, 8))
		lr := NewAccessLogReader(strings.NewReader(in), nodes)
		prev := int64(0)
		for i := 0; ; i++ {
			l, err := lr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var te *LineError
				if !errors.As(err, &te) || te.Line < 1 {
					t.Fatalf("error %v names no line", err)
				}
				return
			}
			switch {
			case l.At < 0 || l.At > MaxTimeMs:
				t.Fatalf("request %d at %d ms, out of range", i, l.At)
			case l.At < prev:
				t.Fatalf("request %d at %d ms, before the previous one at %d", i, l.At, prev)
			case l.Key == "" || len(l.Key) > limiter.MaxKeyBytes || !utf8.ValidString(l.Key) || strings.ContainsAny(l.Key, " \t\r\n"):
				t.Fatalf("request %d has key %q", i, l.Key)
			case l.Node < -1 || l.Node >= max(nodes, 0) && l.Node != -1:
				t.Fatalf("request %d on node %d of %d", i, l.Node, nodes)
			}
			prev = l.At
		}
	})
}
