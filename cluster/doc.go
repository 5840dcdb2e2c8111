// Package cluster makes limiterd nodes one cluster: membership through
// github.com/hashicorp/memberlist (the only package that imports it), and
// the exchange of per-client slice counts that lets every node decide on
// the last merged counts of its peers plus its own.
//
// # Pieces
//
// The protocol is package cluster/engine's Engine: the sync policy
// (aligned ticks, anti-entropy, catch-ups, hellos), coordination at the
// margin with its failover, who is heard, clock skew and the wire format,
// as a pure state machine that is told the time and returns the messages
// to send. Read its package documentation for what the cluster does; this
// package is how it runs over a real network.
//
// Node (node.go and the files next to it) is the memberlist adapter: it
// keeps the memberlist cluster and the member table /cluster shows, runs
// the timer of the aligned ticks, turns membership events into PeerUp and
// PeerDown, hands every message to Receive and sends every engine.Outbound on the
// peer's own goroutine. The transport (transport.go) reads every datagram
// on one goroutine, in order, and, on a node without a label or gossip
// keys, hands the plain user messages among them (all of limiterd's own:
// deltas, asks, answers) to the Node from there; memberlist would pass
// each through two more goroutines of its own, each woken in turn on an
// otherwise idle coordinator. Labelled or encrypted datagrams, and
// memberlist's own, go to memberlist, which delivers user messages on one
// goroutine of its own. The sync messages among them (engine.IsSync) are
// merged on a goroutine of the Node's own (merger.go), through a queue of
// 1,024, so that a tick's deltas from every peer do not hold back the asks
// and answers that arrive behind them, which checks wait for with a
// deadline of a few milliseconds. After a membership change, a message and a
// given-up ask it also sends what engine.Engine.Moved returns: the slices
// of the routed keys whose coordinator just changed, for the new one. Seeds (Config.Join) that are not alive members are
// joined again every RejoinInterval: memberlist alone never merges the two
// halves of a healed partition.
//
// memberlist's push/pull state (LocalState, MergeRemoteState) and its
// broadcasts (GetBroadcasts) are not used: see delegate.go.
//
// # Coordination at the margin
//
// Node.Coordinate is a cluster node's decision.Coordinator. It starts the
// check with engine.Engine.Ask (which picks the key's coordinator,
// passing over one that missed its last asks), sends the ask as one
// memberlist datagram from the calling goroutine, and waits for the
// answer, which the engine returns from the Receive of the delivery
// goroutine (never queued behind a merge), until the decision layer's
// deadline (default 5 ms).
// Without an answer by half the deadline it sends the ask again, the same
// message (engine.Engine.AskAgain; the coordinator answers a repeat with
// the answer it gave), so one lost datagram either way costs a round trip,
// not a check decided alone. Without an answer by the deadline it calls
// AskExpired, sends the release that returns
// (so that a grant the coordinator may have made stops counting at once)
// and returns the context's error: the check is then decided alone with
// the budget. A check whose every better placed node was failed over is
// sent around through the next node on the ring, which passes it on if it
// still hears the coordinator (a cut one way; package engine, "Routing"),
// and goes to the budget at once when there is no such node
// (ErrNoCoordinator) or that node answers it cannot. The coordinator sends its
// answer at once from the goroutine that received the ask, not behind the
// sync traffic queued for the asker. On this machine's loopback a round
// trip takes about 41 µs at the median and 131 µs at the 99th percentile
// (BenchmarkCoordinateRoundTrip; BENCHMARKS.md). A coordinator that goes
// silent is passed over after three missed deadlines (package engine,
// "Failover"); before failover existed, its keys waited the deadline on
// every check until memberlist declared it dead (6.4 s from SIGKILL to the
// first grant of a new coordinator on 8 processes, e2e
// TestCoordinatedBurstsOverHTTP).
//
// # Inspecting and resetting a key
//
// Node.Inspect reads a key's window under some limits on this node,
// counting nothing (counter.Peek): this node's merged view, which another
// node's differs from by what the two have not merged of each other yet,
// and the key's coordinator. Node.Reset erases the key's counts on every
// node through its coordinator (package engine, "Reset"): it sends the
// reset to the coordinator as one datagram from the calling goroutine
// (or applies it itself when it coordinates the key), waits for the
// answer until its context is done, then for the acknowledgement of every
// node the coordinator told, and reports which applied it, which refused
// and which did not confirm. Without an answer it fails
// (ErrResetUnanswered) and claims nothing. The coordinator's reset goes to
// each peer over a stream, on that peer's sender goroutine, not on
// the delivery goroutine.
//
// # Failure behaviour
//
// A node never waits on the network to decide, except for a check at the
// margin of a coordinated cluster, which waits at most the deadline for
// the key's coordinator. Every other send happens on a goroutine of its own per
// peer, fed by a bounded queue (Config.QueueLength; when full, a batch is
// dropped and counted). Counts merged from a peer that became unreachable
// keep counting until their slices leave the window. A partition
// therefore degrades to each side counting what it knows (NFR3); the node
// count the counter shares tolerance and budget among follows the alive
// members. When the partition heals, the rejoin and the catch-up bring
// both sides' counts together.
//
// authenticated (AES-GCM) and with Config.Label tagged; memberlist drops a
// packet or stream of another key or label before it reaches the engine,
// so a node of another cluster can neither join nor inject counts. Without
// a key, anyone who can reach the port can; set one outside a lab.
//
// # Transport: measured
//
// BenchmarkSyncTransport runs nodes in one process at the design load:
// 5,000 checks/s per node over 200,000 clients, limit 600/60 s, sync every
// 200 ms, budget on, memberlist's LAN timings. Per node (2 cores, Intel
// Xeon; CPU is the whole process divided by the nodes, so the load
// generator and the counter are in it: 21 ms/s with no peers):
//
//	3 nodes          sync payload  on the wire  messages  CPU       received  keys differ
//	udp (default)      257 KB/s     259 KB/s     247/s    65 ms/s    100 %     0 of 2,000
//	tcp                246 KB/s     246 KB/s      12/s    47 ms/s    100 %     0
//	udp + LZW          253 KB/s     113 KB/s     243/s    97 ms/s    100 %     0
//	udp + AES-GCM      254 KB/s     263 KB/s     246/s    72 ms/s    100 %     0
//
// At 8 nodes each node sends about 0.85 MB/s of payload (7 peers), in
// about 800 datagrams/s (udp) or 40 streams/s (tcp), and nothing was lost;
// but eight nodes and the load generator saturate the two cores of one
// process (the load ran at 88 % of its pace), so the CPU figures there
// (100-180 ms/s per node, either transport) are not a comparison.
//
// UDP is the default. Both carry the same bytes and lost nothing on
// loopback. TCP costs less CPU at this load (one write per 60 KB instead of
// one per 1.4 KB, some 20 ms/s per node, 2 % of a core), but memberlist's
// SendReliable opens a connection per message: a handshake before every
// delta (the blind interval grows by a round trip), 40 connections/s per
// node left in TIME_WAIT, and a dial to a dead peer that blocks its queue
// for up to TCPTimeout. Datagrams go out at once and alone, and the loss
// they risk on a congested network only matters for keys near their
// limit, which anti-entropy re-sends every second. A datagram stays under
// Config.DatagramBudget, 1,400 bytes by default, with memberlist's
// framing, label and encryption (Ethernet MTU, no fragmentation; a network
// of larger frames may raise it, and each node then handles fewer
// datagrams; nodes bound to a loopback address, all on one host, use what
// the loopback carries, 60,000 bytes on Linux); a message that cannot (a 1 KiB key under a long node name)
// goes over a stream instead. Catch-up and hello replies, which
// can be megabytes, always go over streams in 60 KB messages.
// Compression is off: LZW halves the bytes on the wire but adds half
// again the CPU of the whole sync, and a megabyte per second is nothing on
// a LAN.
//
// The transport reads the header of every inbound stream before memberlist
// does (streamguard.go): memberlist allocates what an unencrypted user
// message or push/pull header claims before it reads a byte of it, so a
// stream claiming more than engine.DecodeLimits.MaxMessageBytes (or more than
// 4,096 nodes) is closed unread, as is one that sends no header within
// 5 s; at most 64 streams have their header read at once, and more are
// closed. The transport's framing is fuzzed (FuzzGuardStream).
//
// The transport under memberlist is this package's (transport.go), not
// memberlist.NetTransport: the same TCP and UDP listeners on one address,
// but NetTransport allocates a fresh 64 KiB buffer for every datagram it
// reads, which at limiterd's datagram rates was a seventh of a node's CPU
// in allocation and more in the garbage collection it drove. This one reads
// into one buffer and hands memberlist a copy of each datagram's size.
//
// # Metrics
//
// New registers limiterd_cluster_members{state}, limiterd_cluster_events_total{event},
// limiterd_cluster_health_score, limiterd_sync_messages_total{direction},
// limiterd_sync_bytes_total{direction}, limiterd_sync_merge_lag_seconds{peer},
// limiterd_sync_decode_errors_total, limiterd_sync_version_mismatches_total,
// limiterd_sync_not_member_messages_total,
// limiterd_sync_replayed_messages_total,
// limiterd_sync_stale_messages_total, limiterd_sync_skewed_messages_total,
// limiterd_sync_dropped_messages_total,
// limiterd_sync_entries_total{result}, limiterd_cluster_clock_offset_seconds{peer},
// limiterd_coordinator_asks_total{to}, limiterd_coordinator_asks_expired_total{peer},
// limiterd_coordinator_skipped_total, limiterd_coordinator_failed_over_peers
// and limiterd_coordinator_silence_notices_total{notice} on the registerer it is given. The per-peer series exist for the peers
// that are alive or suspect and disappear with them.
//
// # States
//
// memberlist reports joins and departures but neither suspicion nor the
// difference between failing and leaving. A node is reported "left" when
// its last metadata carried the leaving mark it sets before a graceful
// shutdown, "dead" otherwise, and "suspect" while memberlist still holds
// it alive but nothing (not even a heartbeat) arrived from it for three
// anti-entropy intervals. Dead and departed members are forgotten after an
// hour.
//
// # Concurrency and zero value
//
// A Node is safe for concurrent use: Status, Members, Ready, Name and Addr
// may be called from any goroutine while Run runs. Run must be called once;
// every goroutine it starts has returned when it returns.
//
// The engine behind a Node is safe for concurrent use (package engine,
// "Concurrency"): the transport's reader and memberlist deliver messages
// on several goroutines, the merger merges sync messages on its own, and
// checks at the margin ask from their request goroutines; the engine
// takes messages in any order, as datagrams come. Until Run starts the
// merger, and after it stops, sync messages are merged where they are
// delivered. The zero Node is not usable: build one with New.
package cluster
