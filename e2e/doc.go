// Package e2e holds limiterd's end-to-end tests: they build the limiterd
// binary, start real processes on 127.0.0.1 with ports they pick, and drive
// them over HTTP. `go test ./e2e` runs a 3-node cluster; set
// LIMITERD_E2E_NODES=8 for the 8-node variant and LIMITERD_E2E_LONG=1 for
// the accuracy runs (a client at 9x and at 0.9x its limit for two windows),
// whose figures BENCHMARKS.md reports.
package e2e
