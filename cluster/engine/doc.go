// Package engine is limiterd's cluster protocol as a pure state machine,
// in the style of etcd raft's RawNode: no goroutines, no clock reads, no
// network and no membership library (internal/arch's import-rule test keeps it so).
// Events go in, each with the time (Tick, Receive, PeerUp, PeerDown,
// Forget, Ask, AskExpired), messages come out (Outbound: a peer, the
// messages, whether over a stream, whether they may be spread; Received
// for what a message brought back). It turns a counter.Counter's changes
// into messages and peers' messages into merges, and carries the checks
// at the margin to their coordinators. Counts are absolute per (limit,
// key, origin node, slice) and merged by max, so a message lost,
// duplicated, reordered or re-sent never over-counts. package cluster
// runs it over memberlist (cluster.Node); limitsim and this package's
// tests run it over a simulated network and clock that own only latency,
// duplication, loss, reordering and skew. There is one implementation of
// the protocol, here.
//
// # Sync
//
//   - Ticks fall on multiples of the counter's SyncInterval counted from
//     the Unix epoch (Engine.NextTick; HS5: 200 ms), the same instants on
//     every node: the per-node budget's bound assumes it. There is one
//     sync interval, the counter's (counter.ClusterConfig), read at every
//     call. Each tick sends the changes since the previous one directly,
//     not through memberlist's broadcast queue: that queue piggybacks on
//     gossip and carries a few KB/s per node at 8 nodes, about 80 times
//     less than the design load needs (roughly 1,000 changed clients per
//     node per tick).
//   - Where a change goes depends on its limit (counter.Counter.Routed,
//     read at every tick). A broadcast limit's changes go to every up
//     peer: each node then holds the cluster's count of every key, which
//     its blind share needs. A routed limit's go to the key's coordinator
//     alone (Routing, below), or, for a key this node coordinates, to the
//     next node in the key's order, which keeps them for a takeover; so a
//     node's sync cost follows its own checks, not the cluster's, and the
//     coordinator alone holds the key's count.
//   - Anti-entropy is scheduled in ticks: the tick of every
//     ceil(AntiEntropyInterval / SyncInterval)-th slot (1 s: every fifth),
//     or the first tick after it if that one was skipped. It re-sends this
//     node's slices of the keys whose window is at least half full, where
//     a lost datagram could change a decision: those that may have changed
//     since the round before the last (counter.AppendHotChanged), so a
//     loss is healed within that interval, and each tenth round (a full
//     round) those that may have changed since the full round before the
//     last, for a change whose delta, both re-sends and even one full
//     round were lost (a key past its limit keeps hundreds of slices, of
//     which only the newest changes; BENCHMARKS.md has what re-sending
//     them all cost; the first two rounds re-send them all), and
//     every routed change of the interval again
//     (a routed key's count here is only this node's part, too small to
//     judge it hot by); a peer that gets none of it gets an empty message,
//     a heartbeat that keeps its view of this node (last message age,
//     clock offset, suspicion) current.
//   - A peer that joins, or comes back after being declared dead
//     (PeerUp), is sent this node's live slices that it should hold (of
//     broadcast limits all, of routed ones those of the keys routed to it)
//     and the ones it had sent us itself (catch-up, over a stream). Each process also greets
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
//     limits allow sends it. A node that holds no key sends none and
//     takes none of the total: its state is empty, and so nothing is owed
//     (a cluster started at once would otherwise owe each node N − 1
//     states, sent later as scans of a full table that carry what the
//     deltas carried meanwhile).
//   - A node is ready to take checks (Ready, which cluster.Node.Ready and
//     so /readyz answer) once every up peer has sent it a sync message
//     since its engine started (Unheard), or CatchUpWait after it joined:
//     a peer that has not yet seen a new process up sends it nothing, not
//     its counts and not the answers to its asks, and one that has sends
//     it what it owes it first, then a heartbeat at least every
//     AntiEntropyInterval. Without it a restarted node decided on counts
//     lacking its peers', its unanswered asks falling back to a budget
//     that trusts them (docs/faults.md, scenario 3).
//   - PeerUp and PeerDown keep the set of up peers, give the counter the
//     node count (counter.SetNodes) and report a change through
//     Config.OnNodesChanged.
//
// # Routing
//
// A limit is routed when no node may admit any of it without asking its
// coordinator (it has no blind share; counter.ClusterConfig.Routing says
// when, RouteAuto by default: on more than MeshNodes nodes, for a limit
// whose blind share would be at most 1). Then no node
// but the coordinator ever needs the others' counts of its keys: a node
// denies on its own count only when that alone is full, and asks
// otherwise; the coordinator decides on the merged count of every node's
// changes, which reach it within a tick, as they reached it before. So the
// coordinated bound, L + Λ + N·T with b = 0 (package counter), holds as
// it did with every change broadcast (the property tests run both ways).
// A non-coordinator's count of a routed key is its own part only: the
// admin listener's GET shows the whole count on the coordinator it names.
//
//   - Where: view.dest, the node Ask would ask (the coordinator, or its
//     runner-up while it is failed over), or, for a key this node
//     coordinates, the next one (a backup of this node's own admissions,
//     which no other node holds).
//   - Moves: when the view changes (a member joins or leaves, a
//     coordinator is failed over or heard again), this node sends its
//     live slices of every routed key whose destination changed to its new
//     one: about 1/N of the keys on a membership change. It sends them at
//     once (Moved, which the transport calls after a membership event, a
//     message and a given-up ask; the engine marks where the view may
//     have changed, so the call costs an atomic load otherwise), and the
//     next tick sends them if nothing called Moved, or the view changed
//     by time alone (a miss followed by FailoverSilence). The new
//     coordinator then holds what every live node
//     admitted, and, when the old one left, its own admissions, which the
//     new one kept as its backup (the backup is the key's next node, the
//     one that takes it over); what it receives twice is merged by max,
//     never added (TestRoutedKeyRebuiltAfterItsCoordinatorLeaves). Until
//     they arrive, a latency after each node sees the change, the new
//     coordinator grants on a count that lacks what the others admitted
//     through the old one: at most a limit, so the window holds at most
//     the bound of two coordinators (package counter), one limit and a
//     lease pool more than the coordinated bound, for that moment. Sent at
//     the next tick instead, that moment was up to an interval, and nodes
//     leaving and coming back took routed keys up to 1.20 × their limit
//     on the simulated network, where they now keep 1.06
//     (internal/clustersim, TestRestartsKeepTheBound).
//   - An ask of a routed key that reaches a node other than the key's
//     coordinator (the asker failed the coordinator over: a cut one way,
//     or asks lost under loss, or a peer's notice) is passed on to the
//     coordinator, the first node on the ring, whenever this node hears
//     it (any message, the answers it sends here to forward included):
//     heard within FailoverSilence, or within SilenceThreshold while this
//     node has not failed it over itself. The coordinator answers the
//     asker directly, so only one node grants the key. Otherwise this node
//     decides it, as a runner-up does, on the counts it holds. A failover
//     here does not stop the relay: under loss the askers fail a live
//     coordinator over often, and tell everyone, and a runner-up that
//     decided then granted on a part of the counts (relayTarget;
//     internal/clustersim's TestRoutedLossStaysWithinTheBudgetBound).
//   - The coordinator answers an ask passed on in an envelope both to the
//     asker and, in a second envelope, to the node that passed it on,
//     which forwards it: under a cut one way the answer goes around it by
//     the path the ask came. A node that is a key's runner-up, with the
//     coordinator failed over here but still a member, asks through the
//     next node on the ring instead of deciding alone (Asked.Around);
//     that node passes the ask on when it hears the coordinator and
//     answers "unable" otherwise. A forwarded answer does not count as a
//     message from the coordinator, which stays failed over (relay.go).
//   - A node that fails a key's coordinator over sends its changes of the
//     key to the coordinator as well as to the runner-up (view.also).
//     Silent to this node, it may not be to the others (a cut one way),
//     and then it still grants their checks, on a count that must hold
//     what this node admits meanwhile; counts merge by max, so nothing is
//     added twice, and a copy sent to a dead node is lost and harmless.
//   - The budget, for the checks no answer came for in time, cannot share
//     a room no node but the coordinator knows: of a routed limit it keeps
//     to its floor (counter.BoundOf's Fallback).
//
// What routing gives up is measured in e2e/faults (docs/faults.md): with
// every change broadcast, each node also judges a check against its own
// complete count before it asks, a second view routing does not have
// (RouteAuto broadcasts up to MeshNodes nodes, where it is cheap). A
// coordinator's clock ahead, which routing alone let grant up to 1.18 ×
// the limit at 200 ms, is within NFR1 since its askers tell it its lead
// ("Clock skew"). A one-way cut with loss, which routing
// alone let through at about twice the limit, is within its bound since
// asks go around the cut and a relay passes asks on while it hears the
// coordinator (above), and the budget knows the others' count from the
// last answer (package counter): at or under the bound in every run
// measured, alone, beside the other scenarios and beside busy loops.
//
// # Coordination at the margin
//
// Every key has a coordinator: CoordinatorOf, consistent hashing of the
// key on a ring of this node and its up peers (64 points each), the same
// on every node that sees the same members; a departure moves only the
// departed node's keys, each to the next node on the ring, and finding a
// key's node is a binary search, whatever the cluster's size. A check that the counter leaves to the
// coordinator (counter.Decision.Coordinate: past the node's blind share,
// see package counter) is started with Ask, after counter.PrepareAsk:
//
//   - When this node is the key's coordinator, Ask decides it at once
//     (counter.Coordinate) and nothing is sent (Asked.Local).
//   - Otherwise Ask gives the ask an id, sets its Settled watermark (the
//     highest id at or below which none of this node's asks is pending,
//     so that the coordinator stops counting a grant its asker never
//     counted) and returns the message for the coordinator. The
//     coordinator's Receive decides it (counter.Coordinate) and returns
//     the answer for the asker (PurposeAnswer); the asker's Receive
//     returns it in Received.Answer when the ask is still pending and the
//     answer comes from the node asked, and drops any other.
//   - Without an answer within part of its deadline (cluster.Node: half),
//     the caller sends the same message again (AskAgain reports whether
//     the ask is still pending, and counts it). A coordinator keeps its
//     last 256 answers and answers a repeat of an ask it decided with the
//     same answer, never a second decision, so a lost
//     ask or a lost answer costs a round trip, not a check decided alone;
//     whichever answer comes first is taken. A repeat older than the
//     answers kept is dropped as a replay (ErrReplay). A node passing an
//     ask on (Routing) does so before the replay check, so a repeat is
//     passed on too and the coordinator tells it from a replay.
//   - Without an answer by the caller's deadline, AskExpired gives the ask
//     up and returns the release for the coordinator (so that a grant it
//     may have made stops counting at once); the caller decides alone,
//     with the budget. Whichever of Receive and AskExpired comes first
//     settles the ask: the other finds it gone.
//
// # Failover
//
// Each give-up counts a miss against the node asked; any message from it
// (a delta, a heartbeat, an answer however late) clears its misses. A
// peer with Config.FailoverMisses (3) misses, or with one miss and nothing
// heard for Config.FailoverSilence (1 s; a live peer sends at least a
// heartbeat every AntiEntropyInterval), is failed over: Ask passes it by
// and asks the key's next node on the ring (Asked.RunnerUp), until
// it is heard from again. So a coordinator that goes silent (stopped,
// overloaded past its deadline, cut off) costs each asking node at most
// three deadlines, plus the asks already in flight beside them, or one
// deadline if its keys are rarely at the margin; not the seconds until
// memberlist declares it dead (e2e TestFaultCoordinatorStopped, with
// SIGSTOP). An answer that comes late clears the misses, so a slow but
// live coordinator is not failed over for its slowness: its checks wait
// the deadline and fall back, as before. A peer whose clock is ahead
// beyond MaxClockOffset is failed over too, however it answers, until its
// clock is back within ("Clock skew"); that sends no notice, since every
// peer judges its clock for itself.
//
// The node that fails a coordinator over by its own misses tells every up
// peer so at its next Tick, once (a silence notice, 'F'; silence.go), and
// a peer that has not heard from the coordinator since the notice was
// sent fails it over too, until it hears from it. On N nodes a node asks
// a given coordinator about 1/N of its asks, so without the notice each
// node would find a silent coordinator out by itself, a second or more
// apart at 1,000 nodes, and every node's first checks of its keys would
// fall back to the budget meanwhile: about one admission per node, over a
// count nobody knows. With it the whole cluster fails the coordinator
// over within a sync interval of the first miss anywhere, and moves its
// routed keys' counts to the runner-up as it does (Routing, Moved).
//
// When every node placed above this one is failed over, Ask sends nothing
// and decides nothing (Asked.Alone): the caller decides with the budget at
// once. This node does not take the key on as its coordinator, because on
// a network where every answer is late every node would, and each would
// then admit up to the limit: a partition's bound instead of the budget's.
//
// While nodes differ on a key's coordinator (some fail over and others
// do not yet, or a failed-over node speaks again and is asked again by
// some first), two coordinators grant at once. Each decides on the merged
// counts and its own grants, so what one misses of the other's is at most
// the grants the other made within a grant's lifetime: the window holds
// at most the coordinated bound plus one more limit, and the budget's
// bound for the checks decided alone meanwhile (package counter,
// "Coordination at the margin"). A stopped node makes no grants; the
// window is at risk only from the moment it runs again until its peers'
// views agree, which the next message of each to the other ends.
//
// Asks, answers and releases are memberlist user messages like the sync
// kinds, so a gossip key encrypts and authenticates them and a label tags
// them: a node without the key can neither ask nor answer. Their decoders
// bound every field (key and names, at most counter.MaxLimitsPerCall
// limits and 8 slices a limit) and drop a message whole otherwise
// (FuzzDecodeCoordination, FuzzCoordinationMatchesMsgpack).
//
// # Who is heard
//
// Only members are heard: a message whose sender is not in the member
// table (Config.Members) is dropped before it is merged or answered,
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
//   - An ask is decided once: its id is remembered for 10 s per asker by
//     the node that decides it, and a repeat gets the first answer. It
//     cannot go round between two nodes that each see the other as its
//     coordinator: a node passes an ask on in an envelope (relay.go),
//     which its receiver decides and never passes on again, or raw to a
//     release before the envelopes, which remembers the id and drops the
//     ask when it comes back.
//   - An answer is taken for a pending ask from whichever member sends it:
//     the node asked, or the coordinator it passed the ask on to. A member
//     could already sway decisions with the counts it sends; a non-member
//     is not heard at all.
//   - A sync message carries its sender's slices and, in a catch-up, the
//     receiver's own; a third node's are refused, and the counter refuses a
//     slice of a key past what its origin's window can hold, so a forged
//     message cannot make a key's slices grow.
//
// # Clock skew
//
// A slice's start is read on its origin's clock (package counter): a
// peer whose clock is off by d has its slices counted for W - d or W + d
// of ours. Up to Timing.MaxClockOffset (default 1s, a sixtieth of a
// minute's window) that is the price, and limiterd_cluster_clock_offset_seconds
// shows it. Beyond it ahead, a node stops merging the slices of that
// peer's own that its sync messages carry (deltas, anti-entropy, full
// state), counts them in limiterd_sync_entries_total{result="skewed"}
// and the messages in limiterd_sync_skewed_messages_total, answers the
// peer's asks as unable to decide them (an ask carries the asker's
// slices, which deciding would merge), passes the peer over as the
// coordinator of its keys as it does a silent one ("Failover": their
// runner-up decides them here, and a routed key's changes go to it;
// asked, the peer would decide on its clock, where this node's slices
// leave its window early and its own stay late), and logs a warning naming the peer
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
// A node whose clock runs ahead of its peers' by d, within MaxClockOffset,
// sees each of their slices leave its window d early. With every change
// broadcast its peers, on their clocks, deny first when the window is
// full, but a routed key's coordinator, and any coordinator's answer at
// the margin, would grant into that room d early (docs/faults.md,
// scenario 5: 1.16–1.18 × the limit routed at 200 ms). So the askers tell
// it: an ask states how far the clock of the node that will decide it
// runs ahead of the asker's, at least (counter.Ask.Lead: the largest
// offset of that node's messages over the last one to two anti-entropy
// intervals, each the clocks' difference less a delay, so never more than
// the truth; 0 when behind or unknown), and each Tick sets the counter's
// clock lead (counter.SetClockLead) to the least its up askers reported
// in the last 10 s (leadReportAge), at most MaxClockOffset: it then judges
// its windows on its askers' time. The least, because every asker's
// report is a bound for that asker alone; on one clock every report is 0
// and nothing changes, whatever the delays (the offset a node's own
// estimate of its peers shows, which a delay makes look like a lead, is
// not used: a node that decided at its peers' median offset behind
// denied compliant clients on a network with 50 ms of latency). The
// metric limiterd_cluster_clock_lead_seconds shows the lead taken.
//
// The same estimate times the deltas. The bound assumes each arrives
// within the counter's DeliveryGrace after its sender's tick, and a
// delta's send time is that tick's, on its sender's clock. Its offset
// less the largest of its sender's recent messages' is how much later it
// came than the fastest of them: the clocks' difference cancels, and what
// is left is its delivery time after the tick, short by the fastest
// message's delay. Stats.DeltaDelays keeps those times and
// Stats.LateDeltas the deltas past the grace (limiterd_sync_delta_delay_seconds,
// limiterd_sync_late_deltas_total), so that an operator can see whether
// the grace holds on the network the cluster runs on, before choosing a
// shorter one.
//
// # Reset
//
// A reset of a key (the admin listener's DELETE) erases the key's counts
// under some of its limits on every node, and keeps anything counted
// before it from coming back (package counter, Counter.ApplyReset, has
// the argument: a slice is erased exactly when it started before the reset
// instant R, on every node alike). It is ordered through the key's
// coordinator, as the checks at the margin are: the node asked (the
// asker) sends it to the coordinator (Reset: 'X'), which applies it under
// the key's lock at its own instant R, between two of the checks it
// decides, and sends it with R to every up peer over a stream ('Z'); each
// applies it with that R and acknowledges it to the asker ('K'), and the
// coordinator answers the asker with R and the peers it told ('Y'). The
// asker's transport waits for the answer and the acknowledgements
// (Received.Reset) as long as its caller allows, and reports which nodes
// confirmed. A reset asked again is refused as a replay (it would erase
// what was counted since), one applied again changes nothing. A node that
// sees the coordinator's clock beyond MaxClockOffset ahead does not apply
// its reset and says so in its acknowledgement: its R would lie further
// in this node's future than the counter's clamp is meant for. A node that
// is not up at the coordinator when the reset is made is not told; the
// others refuse its slices from before R all the same.
//
// # Wire format and versions
//
// Every message is a kind byte ('D' delta, 'S' state: anti-entropy,
// catch-up, hello reply and, empty, heartbeat; 'H' hello; 'Q' ask, 'A'
// answer, 'R' release; 'X' reset asked, 'Z' reset applied, 'Y' its answer,
// 'K' its acknowledgement; 'F' silence notice; 'P' an ask passed on and
// 'W' an answer to forward, the relay envelopes) and a msgpack array whose
// first field is the version: wireVersion, 2, for the sync kinds (1
// before keys were coded against the one before them and starts sent as
// ages: codec.go), coordVersion, 5, for the coordination kinds that need
// it (4 before leads, 3 before stated maxes, 2 before leases), resetVersion, 1, for the
// reset kinds, silentVersion, 1, for the notice, and relayVersion, 1,
// for the envelopes, whose last field is the message they carry, whole.
// The bytes of each
// kind are pinned by goldens under testdata/wire (go test -update
// rewrites them), so that a change of the format is deliberate: delta,
// state, hello and heartbeat are sync version 1, delta_v2 and the others
// version 2; ask, answer and release are version 3, ask_v4 and answer_v4
// version 4, ask_v5 and answer_v5 version 5, ask_v2 and answer_v2
// version 2.
//
// The sync and coordination kinds are written and read by a small msgpack
// writer and reader for their fixed schemas (msgpack.go, askcodec.go), not
// by go-msgpack's reflection: the same bytes (the goldens did not change,
// and TestCodecMatchesMsgpack, FuzzDecodeMatchesMsgpack,
// TestCoordinationMatchesMsgpack and FuzzCoordinationMatchesMsgpack hold
// them to go-msgpack's), at a fraction of the cost and with no allocation
// per entry (none to decode an ask or a release, its results to decode an
// answer, the message to encode). Decoded strings alias the message,
// which counter.Merge, Coordinate and Release never keep
// (TestReceiveKeepsNoBytes, TestReceiveCoordinationKeepsNoBytes); the
// sender's name is a copy. The reset kinds, rare, still use go-msgpack.
//
// Mixed versions:
//
//   - Sync kinds, 1 and 2: a version 2 node decodes both. It states the
//     version it decodes in its membership metadata ("sync=2"; a release
//     before it states none, read as 1), and writes version 2 only while
//     every peer it knows of states 2 (SetPeerSyncVersion), version 1
//     otherwise: during a rolling upgrade the whole cluster syncs in
//     version 1, and it turns to version 2 when the last older node is
//     upgraded or forgotten, logged once on each node. A version 1 node
//     drops version 2 messages (ErrVersion, counted apart), which no
//     node writes while it is a member.
//
//   - Coordination, 2 and 3: a version 3 node decodes asks, answers and
//     releases of version 2 and 3, and answers an ask in the ask's
//     version; a version 2 ask wants no lease and gets none. A version 2
//     node drops version 3 asks (an unknown version, counted as a decode
//     error), so a version 3 node asking it gets no answer: the check
//     falls back to the budget after the deadline, and after three such
//     misses the node fails the version 2 coordinator over (Failover) to
//     the key's next node, until the version 2 node is heard from again
//     (its next heartbeat). Leases exist only between version 3 nodes.
//     How a holder uses a lease is its own (counter, "Leases"): a node of
//     a release before leases bounded their unacknowledged admissions
//     (2026-12-05) spends it hit by hit, which admits less
//     within the same bound, and the coordinator lends and counts a lease
//     alike for both, so the wire did not change. Since the same day an
//     ask carries every local slice that may hold an admission, not yet
//     merged, of the lease its coordinator counts for it, up to
//     counter.MaxAskEntries (64, which every release decodes) rather than
//     the newest 8 per limit, or wants no lease; an asker of an earlier
//     release still carries 8, so its coordinator may replace its lease
//     over admissions it has not seen (counter, "Leases"), as before.
//     From the tenth session of that day an ask carries the slices since
//     its node's newest lease (at most a grant's lifetime back), and a
//     coordinator replaces a lease only on its holder's next ask; a
//     coordinator of an earlier release replaces it on any later ask, so
//     a holder that asked another coordinator and came back within a
//     grant's lifetime may have its lease replaced there over admissions
//     not yet merged, during a failover, which the bound of two
//     coordinators already spans with a lease pool per coordinator.
//
//   - Coordination, 3 and 4: version 4 adds the max an ask states per
//     limit (counter.Ask.Max: a limit the caller stated, such as an Envoy
//     override or /check's limit and window, which no registration
//     holds). An ask that states none is encoded as version 3, byte for
//     byte (the ask golden), and a release is version 3 always, so a
//     version 3 coordinator decides every check of a rule as before. An
//     ask that states a max is version 4, which a version 3 node drops
//     (an unknown version: counted in VersionMismatches, ErrVersion): the
//     asker gets no answer and decides alone with the per-node budget
//     after the deadline (counter.AllowFallback), which is how every
//     stated limit was decided before version 4. So while a version 3
//     node coordinates a key, the key's stated limits keep the budget's
//     bound, L + N·f + N·T (package counter), not the coordinated one,
//     and its misses fail it over as for version 2 above; between version
//     4 nodes both bounds hold for them as for a rule's. A version 4
//     node answers each ask in its version.
//
//   - Coordination, 4 and 5: version 5 adds the lead the asker measured
//     of the clock of the node that decides the ask (counter.Ask.Lead,
//     "Clock skew"). A node states that it decodes version 5 in its
//     membership metadata ("coord=5"; a release before it states none,
//     SetPeerCoordVersion), and an ask states a lead only when it has one
//     and every node that may decide it (the one asked, and the
//     coordinator it may pass the ask on to) states version 5; every
//     other ask is encoded as version 3 or 4, byte for byte as before. So
//     a version 4 node never gets a version 5 ask, and is judged on its
//     own clock as before: a coordinator of version 4 ahead of its peers
//     keeps the price of its offset until it is upgraded.
//
//   - Coordination, 1 and later: a version 1 node drops every
//     coordination kind (unknown kinds), so the keys it coordinates get
//     no answers, and it never asks, deciding alone with the budget.
//
//   - Silence notices: a node of a release before them drops the notice
//     as an unknown kind (a decode error) and fails a silent coordinator
//     over by its own misses, as before; the nodes of this release still
//     fail it over together.
//
//   - Relay envelopes: a node states that it decodes them in its
//     membership metadata ("relay=1"; a release before them states none,
//     SetPeerRelays). A node passes an ask on to a coordinator in an
//     envelope only when that coordinator states it, and raw otherwise,
//     as before (the answer then goes to the asker alone); it asks around
//     only through a node that states it, and decides alone, as before,
//     when none does.
//
//   - Resets: a node of a release before them drops every reset kind, as
//     an unknown kind (a decode error, logged as a malformed message), and
//     applies nothing: a reset of a key it coordinates is never answered,
//     so the asker reports the reset as failed, and one sent to it is
//     never acknowledged, so the asker names it among the nodes that did
//     not confirm. During a rolling upgrade a reset reaches only the
//     nodes of this release and later, and says which.
//
//   - Placement and routing: this release places keys on a ring
//     (CoordinatorOf) where releases before it used rendezvous hashing,
//     and sends a routed limit's changes to the coordinator alone. The
//     bytes of every kind are unchanged, so nodes of both releases sync
//     and ask each other, but while both run they disagree on most keys'
//     coordinators: two coordinators grant those keys (the bound of
//     "Two coordinators at once", package counter), and an older node
//     that coordinates a routed key in its view is sent no changes of it
//     by the newer nodes. Routing starts only on more than MeshNodes
//     nodes, so a cluster of at most 24 nodes upgrades as before; a
//     larger one should upgrade with -sync-routing never on the new
//     nodes, and switch to auto once every node runs this release.
//
// Otherwise a receiver accepts only its own version and its known kinds: a
// message of another version or an unknown kind is dropped whole and
// counted in limiterd_sync_version_mismatches_total (ErrVersion; apart
// from limiterd_sync_decode_errors_total, which counts corruption), never
// half-applied. A
// cluster of versions that cannot sync stays one memberlist cluster
// (membership, /cluster, and the node count every counter shares its
// tolerance and budget among span both versions) but syncs counts only
// within each version: to each group the other is as a partition that
// nobody declared, each group deciding on its own counts, so a client
// spread over both may get up to a limit from each. Keep rolling upgrades
// short.
//
// # Concurrency
//
// An Engine is safe for concurrent use. Receive may run on many goroutines
// at once (a node's transport delivers on several): it locks only the
// peer table, for a few map operations, while decoding uses pooled codec
// state and merging the counter's shard locks, so receives are not
// serialized.
// Ticks are serialized among themselves (one sync goroutine calls them in
// practice) and run concurrently with receives; PeerUp, PeerDown and Forget
// are meant for that same goroutine, so that membership changes and their
// OnNodesChanged calls come in order. OnNodesChanged runs with no engine
// lock held. The zero Engine is not usable: build one with New.
// Ask, AskAgain and AskExpired may be called from any goroutine (a node's checks at
// the margin run on their request goroutines), concurrently with Receive.
package engine
