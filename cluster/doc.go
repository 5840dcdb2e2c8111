// Package cluster makes limiterd nodes one cluster: membership through
// github.com/hashicorp/memberlist (the only package that imports it), and
// the exchange of per-client slice counts that lets every node decide on
// the last merged counts of its peers plus its own.
//
// # Pieces
//
// Engine (engine.go, codec.go) is the sync policy, pure and deterministic
// in the style of etcd raft's RawNode: no goroutines, no clock reads, no
// network, no memberlist. Events go in (Tick, Receive, PeerUp, PeerDown,
// Forget, each with the time), messages come out ([]engine.Outbound: a peer, the
// messages, whether over a stream, whether they may be spread). It turns a
// counter.Counter's changes into msgpack messages and peers' messages into
// merges. Counts are absolute per (limit, key, origin node, slice) and
// merged by max, so a message lost, duplicated, reordered or re-sent never
// over-counts. Node runs it over memberlist; limitsim runs it over a
// simulated network and clock that own only latency, duplication, loss,
// reordering and skew. The policy:
//
//   - Ticks fall on multiples of the counter's SyncInterval counted from
//     the Unix epoch (Engine.NextTick; HS5: 200 ms), the same instants on
//     every node: the per-node budget's bound assumes it. There is one
//     sync interval, the counter's (counter.ClusterConfig), read at every
//     call. Each tick sends the changes since the previous one to every
//     up peer, directly, not through memberlist's broadcast queue: that
//     queue piggybacks on gossip and carries a few KB/s per node at 8
//     nodes, about 80 times less than the design load needs (roughly
//     1,000 changed clients per node per tick).
//   - Anti-entropy is scheduled in ticks: the tick of every
//     ceil(AntiEntropyInterval / SyncInterval)-th slot (1 s: every fifth),
//     or the first tick after it if that one was skipped. It re-sends this
//     node's slices of the keys whose window is at least half full, where
//     a lost datagram could change a decision, so such a loss is healed
//     within that interval; with no such key it sends an empty message, a
//     heartbeat that keeps the peers' view of it (last message age, clock
//     offset, suspicion) current.
//   - A peer that joins, or comes back after being declared dead
//     (PeerUp), is sent all of this node's live slices and the ones it had
//     sent us itself (catch-up, over a stream). Each process also greets
//     every peer once with a hello, which the peer answers with the same
//     state: so a node that restarts under its name learns back the counts
//     it had sent before it died, even when the cluster had not noticed it
//     was gone.
//   - A peer that was silent for longer than the silence threshold (three
//     anti-entropy intervals plus a sync interval: three missed
//     heartbeats) is sent a catch-up when its next message arrives: it
//     was cut off without anyone declaring it dead (a partition shorter
//     than failure detection), so the deltas both ways were lost, and
//     anti-entropy alone re-sends only keys past half their limit. It does
//     the same on hearing from us, so both sides converge within an
//     anti-entropy interval of the heal. (A cut in one direction only is
//     seen by one side, which pushes its state but does not pull the
//     other's: that side's counts of cool keys stay missing until they are
//     hot or a membership change brings a catch-up.)
//   - Catch-ups to one peer, for whatever reason, are at most one per
//     RejoinInterval, so a flapping peer cannot cause a storm of full
//     transfers; a hello from it (a new process) lifts that limit, and is
//     itself answered at most once per RejoinInterval per peer. Full
//     states to all peers together are at most MaxStateSends per
//     RejoinInterval. A state that a new process is owed, or a catch-up
//     held back by the total only, is not dropped: the first Tick the
//     limits allow sends it.
//   - PeerUp and PeerDown keep the set of up peers, give the counter the
//     node count (counter.SetNodes) and report a change through
//     engine.Config.OnNodesChanged.
//
// Node (node.go and the files next to it) is the memberlist adapter: it
// keeps the memberlist cluster and the member table /cluster shows, runs
// the timer of the aligned ticks, turns membership events into PeerUp and
// PeerDown, hands every message to Receive and sends every engine.Outbound on the
// peer's own goroutine. Seeds (Config.Join) that are not alive members are
// joined again every RejoinInterval: memberlist alone never merges the two
// halves of a healed partition.
//
// memberlist's push/pull state (LocalState, MergeRemoteState) and its
// broadcasts (GetBroadcasts) are not used: see delegate.go.
//
// # Coordination at the margin
//
// Every key has a coordinator: CoordinatorOf, rendezvous hashing of the
// key over the names of this node and its up peers (Engine.Coordinator),
// the same on every node that sees the same members, and a departure moves
// only the departed node's keys. A check that the counter leaves to the
// coordinator (counter.Decision.Coordinate: past the node's blind share,
// see package counter) goes there as an ask (Engine.AskMessage: the key,
// the limits, where the asker will count the hits, its newest slices); the
// coordinator's Receive decides it (counter.Coordinate) and returns the
// answer for the asker (engine.PurposeAnswer), whose Receive hands it to
// engine.Config.OnAnswer. Node.Coordinate (the decision.Coordinator of a
// cluster node) sends the ask as one memberlist datagram from the calling
// goroutine, waits for the answer until the decision layer's deadline
// (default 5 ms), and without an answer sends a release (so that a grant
// the coordinator may have made stops counting at once) and returns the
// context's error: the check is then decided alone with the budget. The
// coordinator sends its answer at once from the goroutine that received
// the ask, not behind the sync traffic queued for the asker. On this
// machine's loopback a round trip takes about 41 µs at the median and 131
// µs at the 99th percentile (BenchmarkCoordinateRoundTrip;
// BENCHMARKS.md). A coordinator that dies is asked until memberlist
// declares it dead (each ask costs the deadline and falls back), then its
// keys move to their runner-up: measured 6.4 s from SIGKILL to the first
// grant of a new coordinator on 8 processes (e2e
// TestCoordinatedBurstsOverHTTP).
//
// Asks, answers and releases are memberlist user messages like the sync
// kinds, so a gossip key encrypts and authenticates them and a label tags
// them: a node without the key can neither ask nor answer. Their decoders
// bound every field (key and names, at most counter.MaxLimitsPerCall
// limits and 8 slices a limit) and drop a message whole otherwise
// (FuzzDecodeCoordination).
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
// Only members are heard: a message whose sender is not in the member
// table (engine.Config.Members) is dropped before it is merged or answered,
// and nothing of its sender is kept, so forged sender names cost neither
// work nor memory. Without a gossip key a sender can still take a real
// member's name; with one it cannot send at all. Then, before any work:
//
//   - A message sent more than MaxMessageAge (10 s) before it arrived, on
//     its sender's clock, is stale and dropped (ErrStale); so are asks,
//     answers and releases.
//   - A hello, which costs a full state reply, is answered only if it was
//     sent later than the last one answered from that sender: a captured
//     hello replayed is dropped (ErrReplay). A forged new one costs what
//     the rate limits above allow: one full state per peer per
//     RejoinInterval.
//   - An ask is decided once: its id is remembered for 10 s per asker.
//   - A sync message carries its sender's slices and, in a catch-up, the
//     receiver's own; a third node's are refused, and the counter refuses a
//     slice of a key past what its origin's window can hold, so a forged
//     message cannot make a key's slices grow.
//
// Foreign traffic: with Config.GossipKey all traffic is encrypted and
// authenticated (AES-GCM) and with Config.Label tagged; memberlist drops a
// packet or stream of another key or label before it reaches the Engine,
// so a node of another cluster can neither join nor inject counts. Without
// a key, anyone who can reach the port can; set one outside a lab.
//
// # Clock skew
//
// A slice's start is read on its origin's clock (package counter): a
// peer whose clock is off by d has its slices counted for W - d or W + d
// of ours. Up to Config.MaxClockOffset (default 1s, a sixtieth of a
// minute's window) that is the price, and limiterd_cluster_clock_offset_seconds
// shows it. Beyond it ahead, a node stops merging the slices of that
// peer's own that its sync messages carry (deltas, anti-entropy, full
// state), counts them in limiterd_sync_entries_total{result="skewed"}
// and the messages in limiterd_sync_skewed_messages_total, answers the
// peer's asks as unable to decide them (an ask carries the asker's
// slices, which deciding would merge), and logs a warning naming the peer
// and the offset at most once a minute per peer. The peer stays a live
// member: its heartbeats, hellos and membership go on, it is sent
// everything a peer is sent, it still counts among the nodes that share
// tolerance and budget, and the clock offset metric keeps showing it; the
// slices of this node's own that it sends back are merged, being on this
// clock. The offset judged is the largest its messages showed over the
// last one to two anti-entropy intervals, since a late message (a queue,
// a long catch-up) looks behind but never ahead.
//
// Only a clock ahead is refused: a peer behind looks exactly like one
// whose every message is late, which is what an overloaded node's are,
// and refusing its counts would turn an overload into a partition. Every
// skewed pair still has a side that sees the other ahead, which refuses:
// the peers of a node ahead refuse its slices, and a node behind refuses
// all of theirs. So the skewed node and the others count each other's
// requests as across a partition, at least one way: each side decides on
// its own counts (checks at the margin alone, with the budget), and a
// client spread over both may get up to a limit from each, at most sides
// × limit a window. That is the honest consequence: merging the slices instead
// would shift each of them by d in our windows, letting up to d worth of
// the peer's requests through early or keeping them d too long, with no
// bound on d. When the offset is back under the limit, merging resumes by
// itself (within two anti-entropy intervals), an info line says so, and
// the side that resumes sends the other a hello, whose reply (under the limits of any
// hello's) brings back the slices it refused meanwhile. limiterd's
// -test-clock-offset shifts a node's whole clock (Config.Now and the
// decisions' clock) to test this.
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
// 1,400 bytes with memberlist's framing, label and encryption (Ethernet
// MTU, no fragmentation); a message that cannot (a 1 KiB key under a long
// node name) goes over a stream instead. Catch-up and hello replies, which
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
// # Wire format and versions
//
// Every message is a kind byte ('D' delta, 'S' state: anti-entropy,
// catch-up, hello reply and, empty, heartbeat; 'H' hello; 'Q' ask, 'A'
// answer, 'R' release) and a msgpack array whose first field is the
// version: wireVersion, 1, for the sync kinds, and coordVersion, 2, for
// the coordination kinds, which came with version 2. The bytes of each
// kind are pinned by goldens under testdata/wire (go test -update rewrites
// them), so that a change of the format is deliberate.
//
// A node of version 1 and one of version 2 still sync counts with each
// other: the sync kinds did not change. The version 1 node drops asks,
// answers and releases (unknown kinds, counted as decode errors), so the
// keys it coordinates get no answers: checks at their margin wait the
// deadline and fall back to the budget, with the budget's bound, until the
// rolling upgrade is over; it never asks, and decides alone with the
// budget. Keep the upgrade short.
//
// A receiver accepts only its own version and its known kinds: a message
// of another version or an unknown kind is dropped whole and counted in
// limiterd_sync_decode_errors_total, never half-applied. A mixed-version
// cluster therefore stays one memberlist cluster (membership, /cluster,
// and the node count every counter shares its tolerance and budget among
// span both versions) but syncs counts only within each version: to each
// group the other is as a partition that nobody declared, each group
// deciding on its own counts, so a client spread over both may get up to
// a limit from each. The decode-error metric rises on every node meanwhile.
// A rolling upgrade across a version change is that state for its length:
// keep it short, or make the new version also accept the old one.
//
// # Metrics
//
// New registers limiterd_cluster_members{state}, limiterd_cluster_events_total{event},
// limiterd_cluster_health_score, limiterd_sync_messages_total{direction},
// limiterd_sync_bytes_total{direction}, limiterd_sync_merge_lag_seconds{peer},
// limiterd_sync_decode_errors_total, limiterd_sync_not_member_messages_total,
// limiterd_sync_replayed_messages_total,
// limiterd_sync_stale_messages_total, limiterd_sync_skewed_messages_total,
// limiterd_sync_dropped_messages_total,
// limiterd_sync_entries_total{result} and limiterd_cluster_clock_offset_seconds{peer}
// on the registerer it is given. The per-peer series exist for the peers
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
// An Engine is safe for concurrent use. Receive may run on many goroutines
// at once (memberlist delivers on several): it locks only the peer table,
// for a few map operations, while decoding uses pooled codec state and
// merging the counter's shard locks, so receives are not serialized.
// Ticks are serialized among themselves (one sync goroutine calls them in
// practice) and run concurrently with receives; PeerUp, PeerDown and Forget
// are meant for that same goroutine, so that membership changes and their
// OnNodesChanged calls come in order. OnNodesChanged runs with no engine
// lock held. The zero values of Node and Engine are not usable: build them
// with New and NewEngine.
package cluster
