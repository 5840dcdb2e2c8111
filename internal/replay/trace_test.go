package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// readTrace reads every request of data, or the first error.
func readTrace(data string) ([]Request, error) {
	tr := NewReader(strings.NewReader(data), 0)
	var reqs []Request
	for {
		r, err := tr.Next()
		if err == io.EOF {
			return reqs, nil
		}
		if err != nil {
			return reqs, err
		}
		reqs = append(reqs, r)
	}
}

func TestTraceReader(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []Request
	}{
		{"empty", "", nil},
		{"comments and blanks only", "# x\n\n   \n\t# y\n", nil},
		{"no final newline", "0 a\n7 b", []Request{{0, "a"}, {7, "b"}}},
		{"tabs and padding", "\t 1\t\ta  \n", []Request{{1, "a"}}},
		{"crlf", "1 a\r\n2 a\r\n", []Request{{1, "a"}, {2, "a"}}},
		{"equal times", "3 a\n3 b\n3 a\n", []Request{{3, "a"}, {3, "b"}, {3, "a"}}},
		{"utf-8 key and leading zeros", "007 cé#1\n", []Request{{7, "cé#1"}}},
		{"largest time", "9007199254740991 z\n", []Request{{MaxTimeMs, "z"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readTrace(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzTraceReader checks the parser's contract on any input: what it
// returns is well formed, an error names a line that exists, and a trace it
// accepts reads back the same after being written out canonically. It also
// replays every accepted trace and checks NFR1 and the counts.
func FuzzTraceReader(f *testing.F) {
	for _, s := range []string{
		"", "0 a\n", "0 a\n1 b\n1 a\n", "# c\n\n5 k\r\n", "1 a b\n", "2 a\n1 a\n", "x a\n",
		"9007199254740991 a\n", "18446744073709551616 a\n", "1 \xff\n", "\t3\tk\n", "0 a\n0 a\n0 a\n1 a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := readTrace(string(data))
		last := int64(0)
		for _, r := range reqs {
			if r.At < last || r.At > MaxTimeMs {
				t.Fatalf("time %d out of order or range (previous %d)", r.At, last)
			}
			last = r.At
			if r.Key == "" || !utf8.ValidString(r.Key) || strings.IndexFunc(r.Key, unicode.IsSpace) >= 0 {
				t.Fatalf("bad key %q accepted", r.Key)
			}
		}
		if err != nil {
			var te *LineError
			if !errors.As(err, &te) {
				t.Fatalf("error %v is not a *traceError", err)
			}
			if lines := strings.Count(string(data), "\n") + 1; te.Line < 1 || te.Line > lines {
				t.Fatalf("error names line %d of %d: %v", te.Line, lines, err)
			}
			return
		}
		var canon strings.Builder
		for _, r := range reqs {
			fmt.Fprintf(&canon, "%d %s\n", r.At, r.Key)
		}
		again, err := readTrace(canon.String())
		if err != nil || !slices.Equal(again, reqs) {
			t.Fatalf("canonical form %q reads back as %v, %v; want %v", canon.String(), again, err, reqs)
		}

		const limit = 20 // a slice may hide floor(20 x 10 %) = 2
		rp, err := New(Config{Limit: limit, Window: 100 * time.Millisecond, Slices: 4})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := rp.Run(strings.NewReader(string(data)), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Requests != len(reqs) || sum.Accepted+sum.Rejected != sum.Requests {
			t.Fatalf("summary %+v for %d requests", sum, len(reqs))
		}
		if sum.MaxInWindow > limit+2 {
			t.Fatalf("%d of key %q accepted in 100 ms; the limit is %d + 2", sum.MaxInWindow, sum.MaxKey, limit)
		}
	})
}

// TestTraceReaderNodes reads the optional NODE field of a cluster trace.
func TestTraceReaderNodes(t *testing.T) {
	tr := NewReader(strings.NewReader("0 a 2\n1 b\n# c\n2 c 0\n3 d 002\n"), 3)
	var got []string
	for {
		r, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %d", r.At, r.Key, tr.Node()))
	}
	if want := []string{"0 a 2", "1 b -1", "2 c 0", "3 d 2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzClusterReplay replays any trace that parses on a small simulated
// cluster without the budget and checks NFR2's one-sided error: a request
// is rejected only when its key really had the limit accepted in the window
// before it, whatever the nodes, ticks and duplicated deliveries.
func FuzzClusterReplay(f *testing.F) {
	for _, s := range []string{
		"0 a 0\n0 a 1\n1 a 2\n", "0 a\n1 a\n2 a\n3 a\n4 a\n5 a\n", "0 a 0\n50 a 1\n50 a 2\n120 b 1\n",
		"0 a 3\n", "0 a 1 x\n", "1 a\n0 a\n",
	} {
		f.Add([]byte(s), uint8(3), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, nodes uint8, dup bool) {
		// The simulation steps through every sync interval of the span: a
		// trace of two lines 10^8 ms apart takes seconds per node, slow,
		// not wrong, and the fuzzer took it for a hang (a 10-minute run
		// found "1 0\n100010000 0"). Keep to spans it can afford.
		if traceSpanMs(data) > 60_000 {
			return
		}
		cfg := Config{Limit: 3, Window: 100 * time.Millisecond, Slices: 2, Seed: seed.LCGSeed}
		cfg.Sim = clustersim.Config{Nodes: 1 + int(nodes%5), Sync: 20 * time.Millisecond, Latency: time.Millisecond,
			Stagger: 20 * time.Millisecond, Floor: 1, Grace: 0.25, Dup: dup}
		sum, err := RunCluster(cfg, strings.NewReader(string(data)), io.Discard)
		if err != nil {
			var te *LineError
			if !errors.As(err, &te) && !errors.Is(err, limiter.ErrInvalidKey) {
				t.Fatalf("error %v is neither a trace error nor a key the limiter refuses", err)
			}
			return
		}
		if sum.Accepted+sum.Rejected != sum.Requests {
			t.Fatalf("summary %+v does not add up", sum)
		}
		if sum.FalseRejections != 0 {
			t.Fatalf("%d false rejections without a budget", sum.FalseRejections)
		}
	})
}

// traceSpanMs is the time between the first and the last request of the
// trace's lines that parse (0 if none).
func traceSpanMs(data []byte) int64 {
	tr := NewReader(bytes.NewReader(data), 5)
	first, last := int64(-1), int64(0)
	for {
		r, err := tr.Next()
		if err != nil {
			break
		}
		if first < 0 {
			first = r.At
		}
		last = r.At
	}
	if first < 0 {
		return 0
	}
	return last - first
}
