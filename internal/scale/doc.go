// Package scale measures what the full mesh costs as the cluster grows
// (issue 4, figure 3): the HS2 load (40,000 checks/s over 200,000 keys, or
// a rate per node) on simulated clusters of 8 to 128 nodes (package
// internal/clustersim) running limiterd's real counter, limiter, decision
// layer and Engine, with every message's real encoded size. limitsim scale
// --mesh prints its tables (Write); docs/scaling.md reads the numbers.
// Package internal/scale/nodecost is the study of issue 20, which plain
// limitsim scale runs: a node's cost up to 1,000 nodes, the coordinator
// on.
//
// Per cluster size (Run) it reports, per node, the sync messages and bytes
// sent and received, the entries merged, node 0's state, live heap and
// the time its Engine took (Config.Cost), and the accuracy of a 9x client,
// a 0.9x client and the adversarial burst (Burst) against the derived
// bound (burst.ClusterBound). One window of warm-up, during which only
// node 0 receives, then the measured seconds with the full exchange.
//
// # What holds
//
// Nothing is lost in the simulated network: every copy sent is received,
// message for message and byte for byte. With no hot background key,
// anti-entropy is exactly one heartbeat a second from every node to every
// peer, and every node sends at least one delta per tick to each peer
// (the N² term). The warm-up shortcut changes nothing for node 0 nor for
// the traffic (TestScaleWarmupOnlyNode0Receives), and the accuracy
// clients decide inside the load as they do alone
// (TestScaleAccuracyUnaffectedByLoad), which is why they run alone. The
// burst reaches the bound exactly when N divides the limit. Heap and times
// depend on the machine and its load; every other figure is deterministic.
//
// # Concurrency
//
// Run takes every core: the simulated cluster spreads each instant's
// ticks and deliveries over GOMAXPROCS goroutines (clustersim.Config
// Workers), which end before each step returns. A Run is otherwise
// single-goroutine and shares nothing with another.
package scale
