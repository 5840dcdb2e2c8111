// Package clustersim is the one simulated network of cluster/engine
// engines: limiterd's real nodes, joined by a network and driven by a
// clock that the caller controls, deterministic and without real time. The
// subcommands of limitsim (seed, replay, burst, scale) and the engine's
// black-box tests (cluster/engine, package engine_test) drive it.
//
// # The nodes
//
// New builds N nodes, each with limiterd's real counter.Counter in
// cluster mode (counter.SetCluster with Nodes = N, the sync interval and
// the budget; coordinated, as in production, unless Config.Uncoordinated),
// a limiter.Limiter with one rule (Config.Limit per Config.Window in
// Config.Slices), a decision.Decider (the frontends' decision layer, on
// the node's clock) and an engine.Engine with limiterd's configuration for
// UDP (engine.DefaultConfig; Config.EditEngine may change it).
//
// Every Check goes through Decider.Decide, so a check past the node's
// blind share and any lease it holds goes to the key's coordinator through
// the engine's asking side, as cluster.Node.Coordinate drives it over
// memberlist: Engine.Ask picks the coordinator (passing over one that
// missed its last asks) and either decides at once, when the node itself
// is the coordinator, or returns the ask, which goes to the coordinator's
// Engine.Receive; its answer goes back to the asker's Receive, which
// returns it as awaited, or, without one in time, Engine.AskExpired gives
// the ask up and returns the release. The answer may lend a lease (the
// counter's LeaseShare), which the node then decides on alone.
//
// To keep a check synchronous the ask is decided at the check's instant,
// on the coordinator's clock, and the answer taken at that instant; the
// latency only decides whether it comes in time. An ask whose round trip,
// twice the latency, exceeds the deadline (decision.DefaultDeadline, or
// Config.Deadline), or whose ask or answer the network loses (with the
// sync messages' loss rate and seeded source, or across a cut), gets no
// answer: the coordinator still decides an ask that arrived (a grant may
// exist there), the asker sends a release, which leaves at the deadline
// and arrives a latency later unless lost, and the Decider falls back to
// the budget; a late answer still reaches the asker's engine a round trip
// after the ask, as on a real network, which tells it its coordinator is
// alive. So with the default deadline of 5 ms, a latency of 3 ms or more
// makes every check at the margin that is not on its coordinator a
// fallback. The real deadline of the context is not consulted: decisions
// must not depend on how fast the simulation runs. The oracle keeps the
// grants whose answer was lost and whose asker denied (Stats.Orphans,
// OrphanHits): the one over-count the coordinated design has.
//
// # Time and the network
//
// One simulated clock, in integer milliseconds of true time, drives the
// nodes; node i reads it plus its clock offset (Config.Skew spreads the
// offsets evenly over [-Skew, +Skew]). A run of relative times (before
// 1e12 ms, as the patterns limitsim generates) runs from EpochMs,
// 2026-01-01 00:00 UTC, so that the slice starts and send times on the
// wire take the bytes they take in production; a run of Unix timestamps
// runs at its own times. The nodes see each other up (Engine.PeerUp:
// hellos) just before the first request (Start).
//
// Every sync interval each node that counted something since its last
// tick, and every node whose engine has anti-entropy due
// (Engine.NextAntiEntropy: hot keys or a heartbeat), calls Engine.Tick
// with its own time, and each message the engine returns, and each answer
// of Engine.Receive, is delivered to its peer after the latency. Any other
// tick sends nothing and changes no decision, so it is skipped; limiterd
// ticks every interval, Config.EveryTick does too, and a test checks that
// both give the same decisions and messages. The simulator has no sync
// policy of its own: only the network (latency, duplication, seeded loss
// and reordering, partitions with SetCut) and the clocks. Config.Stagger
// makes node i tick i x Stagger / N after node 0 (real nodes' timers have
// unrelated phases); Config.ClockTicks ticks each node on its own clock;
// Config.Dup delivers every message a second time, two intervals and 1 ms
// late.
//
// Stop silences a node as SIGKILL does (nothing leaves or reaches it, its
// peers are not told), Leave as SIGTERM does (its peers take it down at
// once), and Restart starts it again as a new process under its name: an
// empty counter, a new engine whose ask ids start above the old one's,
// and PeerUp both ways, so it greets its peers and learns back what it
// had sent. Every node calls Engine.Moved where cluster.Node does: after
// a membership change, the messages of an instant, and a given-up ask.
//
// # One node alone
//
// Config.Record writes everything one node takes in (its peers, ticks,
// messages, checks, what the network brought back for its asks, and its
// decisions) to a stream as the run goes, and Replay runs that stream
// again on the node alone, checking every decision against the recorded
// one. All nodes of a simulation share one process and its caches, so at
// large N each node's state is cold whenever it runs and its engine time
// grows with N where a node on a machine of its own would not; the replay
// times the node's engine as that node would spend it (alone.go).
//
// # What holds
//
// Every run is deterministic: at one instant ticks run first (in node
// order), then deliveries (in send order), then the request, and the
// network's randomness comes from Config.NetSeed. With Config.Workers the
// ticks and deliveries of one instant run on several goroutines, each
// node on one, and their messages are sent afterwards in the order
// one-by-one processing would send them, so the workers change no result.
// Stats counts every copy sent, lost and cut ones included; Finish
// delivers what is in flight so that the figures cover every change.
//
// # Concurrency
//
// A Cluster is driven by one goroutine; its methods are not safe for
// concurrent use. The goroutines of Config.Workers end before the method
// that started them returns. Clusters share nothing: independent runs may
// go in parallel.
package clustersim
