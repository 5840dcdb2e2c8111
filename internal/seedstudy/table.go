package seedstudy

import (
	"bufio"
	"fmt"
	"io"

	"github.com/limiterd/limiterd/internal/clustersim"
)

// Row is one algorithm's result on one pattern.
type Row struct {
	Algorithm string
	Accepted  int
	Rejected  int
	Max60     int     // most accepted requests in any [t, t+60 s)
	Ratio     float64 // Max60 / limit
}

// Block is one pattern with a row per algorithm.
type Block struct {
	Pattern  Pattern
	Requests int
	Rows     []Row
}

// Table runs every seed algorithm on every seed pattern.
func Table() ([]Block, error) {
	algs := Algorithms()
	var blocks []Block
	for _, p := range Patterns() {
		at := p.At()
		b := Block{Pattern: p, Requests: len(at)}
		for _, a := range algs {
			m, err := a.Build()
			if err != nil {
				return nil, err
			}
			acc, err := RunModel(m, at)
			if err != nil {
				return nil, fmt.Errorf("%s on %q: %w", a.Name, p.Name, err)
			}
			max60 := clustersim.MaxInWindow(acc, WindowMs)
			b.Rows = append(b.Rows, Row{
				Algorithm: a.Name,
				Accepted:  len(acc),
				Rejected:  len(at) - len(acc),
				Max60:     max60,
				Ratio:     Ratio(max60, Limit),
			})
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// WriteTable prints the blocks in the seed's layout: a model line, then
// per pattern a header and an aligned table.
func WriteTable(w io.Writer, blocks []Block) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "model: %d s, limit %d/%d s, %d slices of %d s, token bucket %d tokens refilled at %d/s\n",
		DurationMs/1000, Limit, WindowMs/1000, Slices, SliceMs/1000, Bucket, Refill)
	fmt.Fprintf(bw, "max 60 s: most requests accepted in any interval [t, t+60 s); ratio = max 60 s / %d; NFR1 allows %.1fx\n",
		Limit, NFR1Ratio)
	for _, b := range blocks {
		fmt.Fprintf(bw, "\npattern %q: %d requests (%s)\n", b.Pattern.Name, b.Requests, b.Pattern.Desc)
		fmt.Fprintf(bw, "%-24s%10s%10s%10s%8s%13s\n", "algorithm", "accepted", "rejected", "max 60 s", "ratio", "within 1.1x")
		for _, r := range b.Rows {
			within := "yes"
			if r.Ratio > NFR1Ratio {
				within = "no"
			}
			fmt.Fprintf(bw, "%-24s%10d%10d%10d%8.3f%13s\n", r.Algorithm, r.Accepted, r.Rejected, r.Max60, r.Ratio, within)
		}
	}
	return bw.Flush()
}
