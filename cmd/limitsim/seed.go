package main

import (
	"bufio"
	"fmt"
	"io"
)

// nfr1Ratio is NFR1: no 60 s interval may hold more than 1.1 x the limit.
const nfr1Ratio = 1.1

// seedRow is one algorithm's result on one pattern.
type seedRow struct {
	algorithm string
	accepted  int
	rejected  int
	max60     int     // most accepted requests in any [t, t+60 s)
	ratio     float64 // max60 / limit
}

// seedBlock is one pattern with a row per algorithm.
type seedBlock struct {
	pattern  pattern
	requests int
	rows     []seedRow
}

// seedTable runs every seed algorithm on every seed pattern.
func seedTable() ([]seedBlock, error) {
	algs := seedAlgorithms()
	var blocks []seedBlock
	for _, p := range seedPatterns() {
		at := p.at()
		b := seedBlock{pattern: p, requests: len(at)}
		for _, a := range algs {
			m, err := a.build()
			if err != nil {
				return nil, err
			}
			acc, err := runModel(m, at)
			if err != nil {
				return nil, fmt.Errorf("%s on %q: %w", a.name, p.name, err)
			}
			max60 := maxInWindow(acc, seedWindowMs)
			b.rows = append(b.rows, seedRow{
				algorithm: a.name,
				accepted:  len(acc),
				rejected:  len(at) - len(acc),
				max60:     max60,
				ratio:     ratio(max60, seedLimit),
			})
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// writeSeedTable prints the blocks in the seed's layout: a model line, then
// per pattern a header and an aligned table.
func writeSeedTable(w io.Writer, blocks []seedBlock) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "model: %d s, limit %d/%d s, %d slices of %d s, token bucket %d tokens refilled at %d/s\n",
		seedDurationMs/1000, seedLimit, seedWindowMs/1000, seedSlices, seedSliceMs/1000, seedBucket, seedRefill)
	fmt.Fprintf(bw, "max 60 s: most requests accepted in any interval [t, t+60 s); ratio = max 60 s / %d; NFR1 allows %.1fx\n",
		seedLimit, nfr1Ratio)
	for _, b := range blocks {
		fmt.Fprintf(bw, "\npattern %q: %d requests (%s)\n", b.pattern.name, b.requests, b.pattern.desc)
		fmt.Fprintf(bw, "%-24s%10s%10s%10s%8s%13s\n", "algorithm", "accepted", "rejected", "max 60 s", "ratio", "within 1.1x")
		for _, r := range b.rows {
			within := "yes"
			if r.ratio > nfr1Ratio {
				within = "no"
			}
			fmt.Fprintf(bw, "%-24s%10d%10d%10d%8.3f%13s\n", r.algorithm, r.accepted, r.rejected, r.max60, r.ratio, within)
		}
	}
	return bw.Flush()
}
