// Package e2e holds limiterd's end-to-end tests of a cluster of real
// processes: they build the limiterd binary, start processes on 127.0.0.1
// with ports they pick (internal/nodetest), and drive them over HTTP and
// gRPC: convergence, SIGKILL and restarts, a stalled half, coordinated
// bursts and a killed coordinator, Envoy's rate limit service (and the
// real grpcurl), nodes of another cluster kept out, the gossip key's
// rotation, a flood of 10 million keys (scenario 6 of docs/faults.md,
// from limitload flood), and the examples/ recipes behind the real nginx,
// Caddy, HAProxy and Traefik. `go test ./e2e` runs a 3-node cluster; set
// LIMITERD_E2E_NODES=8 for the 8-node variant and LIMITERD_E2E_LONG=1 for
// the accuracy runs (limitload's steady pattern at 9x and at 0.9x the
// limit for two windows, internal/loadgen), whose figures BENCHMARKS.md
// reports (make bench-e2e); LIMITERD_E2E_LIMIT, LIMITERD_E2E_SYNC and
// LIMITERD_E2E_GRACE set their limit, sync interval and delivery grace,
// and LIMITERD_E2E_SATURATE=R runs them beside R checks a second of other
// keys at node 1, on a saturated machine. Two benchmarks set limiterd
// beside gubernator and envoyproxy/ratelimit, each built from its Go
// module: over their HTTP APIs (BenchmarkAgainstOthers) and behind the
// real Envoy (BenchmarkEnvoyRecipe); make bench-others runs them. The
// programs a test needs that the machine lacks come from Debian's
// packages, installed as root, or the test skips saying why.
//
// Its siblings hold the rest: e2e/faults the fault scenarios in network
// namespaces (internal/netlab), e2e/deploy the deployment files against
// the tools that read them, and e2e/soak the soak that rewrites
// docs/faults.md.
//
// The tests share the machine's cores with the other packages' (go test
// runs packages at once): a wait for an event is bounded
// (nodetest.Eventually), and the bound is not a timing assertion.
package e2e
