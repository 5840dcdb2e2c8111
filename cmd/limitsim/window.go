package main

import "github.com/limiterd/limiterd/internal/oracle"

// maxInWindow returns the most entries of at (instants in ms,
// non-decreasing) in any half-open interval [a, a+window): the oracle's.
func maxInWindow(at []int64, window int64) int {
	n, _ := oracle.MaxInWindow(at, nil, window)
	return int(n)
}

// ratio is n over limit, the figure the seed prints as "asim orani".
func ratio(n int, limit int64) float64 { return float64(n) / float64(limit) }
