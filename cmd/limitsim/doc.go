// Command limitsim runs the seed design study's experiments
// (seeds/000_3c268723d32e1f47.txt, "Reference measurements" in SPEC.md) on
// limiterd's own code. Everything runs on a simulated clock and, for the
// cluster, a simulated network: every run is deterministic and takes no
// real time.
//
// Usage:
//
//	limitsim seed [--plot DIR]
//	limitsim replay [--limit N] [--window D] [--slices K] [--decisions] [--trace FILE]
//	                [--nodes N [--sync D] [--latency D] [--skew D] [--stagger D]
//	                 [--seed S] [--budget=true|false] [--budget-floor F] [--dup]
//	                 [--coordinate=true|false] [--deadline D]]
//	limitsim replay --rules FILE [--top N] [--decisions] [--trace FILE] [--nodes N ...]
//	limitsim burst
//	limitsim scale [--nodes 8,64,256,1000] [--scenarios healthy,fallback] [--json] [--zipf S] [--seconds S] [--from FILE --svg FILE] [--cpuprofile FILE]
//	               [--alone=false] [--records DIR]
//	limitsim scale --replay DIR [--rounds K]
//	limitsim scale --mesh [--nodes 8,16,32,64,128] [--keys K] [--rate R | --rate-per-node R] [--seconds S]
//	limitsim help [COMMAND]
//
// "limitsim -h" and "limitsim COMMAND -h" explain every flag. Help goes to
// standard output; errors go to standard error. The exit status is 0 on
// success, 1 for a runtime error (an unreadable or malformed trace, an
// invalid rule file) and 2 for a usage error (an unknown command or flag,
// an invalid limit).
//
// The commands are wiring and output; the experiments live in packages
// under internal/, whose documentation says what each computes and what
// holds:
//
//	seed    the window and distributed tables (internal/seedstudy), and
//	        with --plot DIR their charts (internal/seedplot); docs/img holds
//	        them as "limitsim seed --plot docs/img" writes them
//	replay  a trace on one node or on the simulated cluster (internal/replay:
//	        the trace format and every summary line), or with --rules a
//	        what-if replay of an access log against a rule file
//	        (internal/whatif; cmd/limitsim/testdata/whatif has an example)
//	burst   the cross-node burst and the per-node budget (internal/burst;
//	        docs/blind-interval.md reads the tables)
//	scale   what one node costs as the cluster grows to 1,000 nodes,
//	        the coordinator on (internal/scale/nodecost, issue 20); with
//	        --mesh what the full mesh's sync costs one node on 8 to 128
//	        nodes (internal/scale; docs/scaling.md reads its tables)
//
// The simulated cluster every cluster run uses is internal/clustersim:
// limiterd's real counter, limiter, decision layer and cluster/engine
// Engine on each node, joined by a simulated network. BENCHMARKS.md has
// the figures.
package main
