// Package nodecost measures what one node of a coordinated cluster costs
// as the cluster grows from 8 to 1,000 nodes (issue 20): limitsim scale
// runs it, and prints its rows as a table or as JSON lines (WriteTable,
// WriteJSON) that scripts read.
//
// Per cluster size N and scenario (Run) it drives the simulated cluster of
// package internal/clustersim with limiterd's defaults, the coordinator on
// (clustersim.DefaultConfig), RatePerNode checks a second on each node,
// round robin or drawn at random (Config.Spread), for keys drawn among
// KeysPerNode x N by Zipf popularity from a seeded PCG, under the one
// rule of HS3 (600 per 60 s, 12 slices), for Duration of model time. It
// reports every engine message's bytes and count per node and second
// (sync and coordination), the engines' CPU time per check
// (clustersim.Times: Tick, Receive and the asks), the live heap
// of the whole simulation per node, the share of checks that waited on
// another node and the share of those the coordinator granted, and the
// accuracy: the worst window of one key against the
// limit and the false rejections. In the Fallback scenario one node
// (Config.CutNode) is cut off both ways for a while: it decides alone, and the
// others fail its keys over.
//
// # What holds
//
// The run is deterministic: the same Config gives the same rows but for
// the heap, the engine time and the wall time, which depend on the machine
// and its load (Workers changes none of the others). Judging every key of
// a 1,000-node run exactly would cost a log per key, so the hottest ranks
// are judged (Config.Judged: by default every rank whose expected checks
// in a window reach a quarter of the limit, Zipf's mass being known) with
// clustersim.Tally, the exact oracle of the window, and a rejection of any
// other key counts as a false rejection (Row.UnjudgedRejections): it is
// not proved right, and one that is wrong is never missed. The worst ratio
// is over the judged keys, which hold every key that can reach the limit
// but by a large fluctuation.
//
// The cost of the run follows the engine: the simulator's own work per
// check, amortized over the ticks and deliveries, does not grow with N.
// Checks run one at a time (an ask is answered synchronously), so a run
// uses about one core; a full window at 1,000 nodes takes hours
// (BENCHMARKS.md, "Issue 20").
//
// # Concurrency
//
// Run uses Config.Workers goroutines for each instant's ticks and
// deliveries (clustersim.Config.Workers), which end before each step
// returns; it is otherwise single-goroutine, and independent runs share
// nothing.
package nodecost
