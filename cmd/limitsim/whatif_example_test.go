package main

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/seed"
)

// genAccessLog writes the access log of the what-if example,
// testdata/whatif/access.log: ten minutes of one site's traffic as
// "RFC3339-TIME KEY", from the seed's LCG, so it is reproducible:
//
//   - 20 browsing clients (198.51.100.x), each active for a few minutes,
//     a page every 30 s on average, 4 to 15 requests over 1.5 s per page;
//   - an office behind one NAT address (192.0.2.10), busy from 09:02 to
//     09:06: a page every 1.8 s on average, about 5 requests/s;
//   - a scraper (203.0.113.66) from 09:05:00 to 09:06:30, about 12/s;
//   - two premium customers (premium:acme, premium:globex), at about
//     1.4/s and 0.5/s;
//   - two API keys at about 0.8/s and 0.3/s (api:k-7f3a, api:k-19c2) and
//     a batch job (api:k-batch) sending 16 requests in 800 ms every minute.
func genAccessLog() []byte {
	type event struct {
		ms  int64
		key string
	}
	const span = 10 * 60 * 1000
	start := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	rnd := seed.NewLCG(20260728)
	// exp draws an exponential gap of the given mean, at least 1 ms.
	exp := func(meanMs float64) int64 { return int64(-math.Log(1-rnd.Next())*meanMs) + 1 }
	var evs []event
	add := func(ms int64, key string) {
		if ms < span {
			evs = append(evs, event{ms, key})
		}
	}
	page := func(at int64, key string) {
		n := 4 + int(rnd.Next()*12)
		for range n {
			add(at+int64(rnd.Next()*1500), key)
		}
	}
	for i := range 20 {
		key := fmt.Sprintf("198.51.100.%d", 11+i*7)
		from := int64(rnd.Next() * span * 0.6)
		to := from + int64(span*(0.2+rnd.Next()*0.4))
		for t := from + exp(10_000); t < to; t += exp(30_000) {
			page(t, key)
		}
	}
	for t := 120_000 + exp(1800); t < 360_000; t += exp(1800) {
		page(t, "192.0.2.10")
	}
	for t := int64(300_000); t < 390_000; t += 60 + int64(rnd.Next()*45) {
		add(t, "203.0.113.66")
	}
	for _, c := range []struct {
		key  string
		mean float64
	}{{"premium:acme", 700}, {"premium:globex", 2000}, {"api:k-7f3a", 1250}, {"api:k-19c2", 3300}} {
		for t := exp(c.mean); t < span; t += exp(c.mean) {
			add(t, c.key)
		}
	}
	for m := int64(0); m < 10; m++ {
		for i := range int64(16) {
			add(m*60_000+20_000+i*50, "api:k-batch")
		}
	}
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.key, b.key)) })
	var b bytes.Buffer
	b.WriteString("# Access log of the what-if example of limitsim replay --rules: TIME KEY per line.\n")
	b.WriteString("# Ten minutes of traffic written by genAccessLog (whatif_example_test.go); go test -update rewrites it.\n")
	for _, e := range evs {
		b.WriteString(start.Add(time.Duration(e.ms) * time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00"))
		b.WriteByte(' ')
		b.WriteString(e.key)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestWhatifAccessLog checks that the example log is what genAccessLog
// writes, so the example can be reproduced and changed in one place.
func TestWhatifAccessLog(t *testing.T) {
	checkGolden(t, filepath.Join("whatif", "access.log"), genAccessLog())
}

// TestWhatifExampleGolden runs the documented example: the log against the
// rules in force and against the proposed change, on one node and on the
// seed's simulated cluster.
func TestWhatifExampleGolden(t *testing.T) {
	log := filepath.Join("testdata", "whatif", "access.log")
	tests := []struct {
		golden string
		args   []string
	}{
		{"current.golden", []string{"--rules", filepath.Join("testdata", "whatif", "rules-current.yaml")}},
		{"proposed.golden", []string{"--rules", filepath.Join("testdata", "whatif", "rules-proposed.yaml")}},
		{"proposed_cluster.golden", []string{"--rules", filepath.Join("testdata", "whatif", "rules-proposed.yaml"), "--nodes", "8", "--top", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, "", append([]string{"replay", "--trace", log}, tt.args...)...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			checkGolden(t, filepath.Join("whatif", tt.golden), []byte(stdout))
		})
	}
}
