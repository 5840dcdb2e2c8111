// Package counter counts requests per key in sliding windows of slices and
// decides whether more fit a limit. It is the pure core of limiterd: no
// goroutines, no I/O, no clock. Every operation takes the current instant as
// an argument, as golang.org/x/time/rate's AllowN(t, n) does; AllowNow is a
// one-line wrapper for callers that want time.Now.
//
// # Model
//
// Time has millisecond resolution: an instant t is read as t.UnixMilli(),
// and every statement below is about that millisecond timeline. A limit is
// "at most L requests per window W"; the window at instant t is the interval
// (t-W, t]. Each (limit, key) pair has a list of slices. A slice has a start
// instant (the instant of its first request) and a count. A request accepted
// at t joins the newest slice if that slice is younger than W/K (K slices per
// window, default 12: 5 s slices for a 60 s window) and either t is the
// slice's start instant or the slice's tail (its requests after the start
// instant) stays within T = floor(Tolerance x L). Otherwise a new slice
// starts at t. A slice counts while its start lies inside the window, that
// is while start > t-W; it is dropped at start+W.
//
// A check of h hits at t counts C = the sum of the live slices and allows
// iff C + h <= L; only then are the hits added. When a call names several
// limits, the hits are added to all of them only if every one has room.
//
// # NFR2: never over-count
//
// A counted slice has start > t-W, and every request in it arrived at or
// after its start, so every counted request lies in (t-W, t]. Hence C never
// exceeds the true number of requests accepted in the window, and a request
// is rejected only when at least L-h+1 requests (L when h = 1) really were
// accepted in the preceding window. The error is one-sided.
//
// # NFR1: at most L + T <= (1 + Tolerance) x L in any window-long interval
//
// Take any interval I of length W and let t be the last instant in I at
// which a request was accepted. Every request accepted in I lies in
// (t-W, t]. When the last one was accepted, C + h <= L, so the requests of
// (t-W, t] in live slices, this one included, number at most L. Any other
// request of (t-W, t] lies in a dropped slice. Slices of one key are ordered
// and a slice ends where the next begins, so only the one dropped slice whose
// successor starts after t-W can reach into (t-W, t], and its first instant
// (its start, <= t-W) does not. What it hides is at most its tail, and a tail
// never exceeds T (a request at a later instant that would push it past T
// opens a new slice instead). So I holds at most L + T accepted requests.
// With the default Tolerance 0.1 that is 1.1 x L, for every arrival pattern.
//
// The seed's 12-slice window counted slices by slice number and could be
// fooled into 2 x L by requests crowded at the end of a slice; here a slice
// carries its own start instant and can never hide more than T.
//
// For L < 1/Tolerance, T is 0: every new instant opens a slice and the
// window is exact (a sliding log), as NFR1 requires when 1.1 x L < L + 1.
//
// Two refinements keep the argument valid in practice. Calls for one key may
// reach the lock slightly out of order; a call older than the key's newest
// slice is treated as made at that slice's start, so each key's timeline is
// monotone. And retry advice is exact: RetryAfter is the wait until the
// oldest slices whose departure makes room have left the window, so the same
// request, repeated after RetryAfter with nothing else arriving, is allowed.
//
// # In a cluster
//
// SetCluster makes the Counter one node of several. Each slice then carries
// its origin node, and slices are named (origin, start): a node counts its
// own requests in its own slices and learns its peers' through Merge, which
// keeps the largest count seen for a name. Counts are absolute, so a lost,
// duplicated, reordered or re-sent message never adds twice, and a node
// that restarts and merges its own slices back from a peer gets exactly
// what it had (those slices are closed: new requests open a new slice).
// The NFR2 argument above holds per origin, hence for the sum: every slice
// counted started inside the window, on its origin's clock.
//
// NFR1 changes in two ways. Every origin has its one straddling slice, so
// the tolerance for hidden tails is shared: each node's slices hide at most
// T/N, with T = TailShare x Tolerance x L (ClusterConfig). And between two
// syncs a node does not know what the others admitted.
//
// # Coordination at the margin (both halves at once)
//
// With ClusterConfig.Coordinated (the default) each key has a coordinator,
// one node that every node agrees on (the cluster layer picks it), and a
// check on node j of h hits, where j's window counts C (j's own slices,
// the merged slices of its peers and, on the coordinator, its grants not
// yet merged), is decided thus:
//
//   - C + h > L: denied here. C never over-counts (above), so at least
//     L − h + 1 requests were accepted in the window: the denial is right.
//   - else, if j's unacknowledged admissions U (what it admitted that its
//     peers may not have merged: the current sync interval, and the one
//     before during the grace) plus h fit its blind share b: allowed here,
//     with no network wait.
//   - else, if j holds a live lease on the key whose unacknowledged
//     admissions plus h fit it: allowed here, with no network wait
//     (Leases, below).
//   - else Allow returns Decision.Coordinate. j sends the coordinator an
//     Ask (PrepareAsk): the limits, its own newest slices of the key, where
//     it will count the hits (Pred) and the lease it would like (Want),
//     dropping the lease it held. The coordinator merges those slices
//     (absolute counts: nothing is added twice) and allows iff its C + h
//     <= L (Coordinate), recording a grant and lending a lease; j counts a
//     grant and takes the lease (Grant) and remembers a denial of one hit
//     until its RetryAfter (RememberDenial), so a client over its limit
//     costs about one round trip per node per wait.
//
// The tolerance floor(Tolerance x L) pays for three things: the slices'
// hidden tails, N·T_node; the blind shares, N·b; and the leases, Λ. What
// the tails leave (the pool) is split by ClusterConfig.LeaseShare: Λ =
// floor(LeaseShare·pool) is lent out as leases, and b = (pool − Λ) / N is
// each node's blind share (BoundOf, Counter.WorstCase: 660 for 600 per minute on 8
// nodes, T_node = 2, b = 3 and Λ = 20; 10 for 10 per second on 8 nodes, whose pool is
// empty and whose every check at the margin is coordinated).
//
// # Leases
//
// A lease is tolerance lent, never limit reserved. The coordinator lends
// the asker of a check it allows up to the asker's Want, no more than the
// window's room and no more than Λ minus the leases other nodes hold on
// the key, and, of a limit every node merges, no more than Λ/(k+1) with k
// leases of other nodes out (a fair share: the first askers of a key
// checked across the nodes would otherwise keep the pool through their
// renewals; this only makes leases smaller, so the bounds below hold
// unchanged); the holder decides hits locally on it, each only while its own
// count has room (C + h <= L, so a lease never admits past a count that is
// full), until its lease time after the answer reached it (LeaseTime, or
// RoutedLeaseTime for a routed limit), and stops using it the moment it
// asks again.
//
// A lease of a limit whose changes every node merges raises the holder's
// blind share while it lives: a check is covered while what the lease
// admitted that is not yet acknowledged, counted as U is (this sync
// interval's, and the interval before's during the grace), plus h fit its
// size r, so at any instant the hits it admitted that no node has merged
// are at most r, as the blind share bounds U. Its Want is twice the
// holder's pace of its current or previous sync interval. A lease of a routed limit
// (below) is spent: its holder sees none of its peers' admissions, so the
// lease admits r in all, and its Want is that pace over RoutedLeaseTime.
// So a merged limit's lease may live long (LeaseTime, 3 s by default):
// its life sets how often it is renewed, not what it admits unseen; a
// routed limit's lives a second.
//
// The coordinator counts the lease against Λ
// until the holder has stopped using it and what it admitted has been
// merged (the longer lease time, whatever the limit's kind, the longest
// answer delay and a grant's lifetime),
// or until the holder's next ask (whose slices carry what the old lease
// admitted) or its release of the ask replaces or drops it. An ask
// carries every local slice of the key that may have changed within a
// grant's lifetime since the newest lease its node took on the key was
// asked for, not only its newest 8: a lease that admitted more slices
// than those, not yet merged, and was replaced on the strength of 8, let
// its coordinator lend the pool again over admissions it had not seen
// (found 2026-12-05: a 64-node routed simulation with 3 s leases measured
// 1.072 × against its bound of 1.06). Since then suffices: a coordinator
// replaces a holder's lease only on the holder's next ask, numbered one
// past the ask the lease answered (or past asks it decided without a new
// lease, which carried the same slices), so no ask to another
// coordinator came between; the holder takes a lease only from the
// answer to its newest ask; and each lease it took before from this
// coordinator was replaced by such an ask, which carried, so, what that
// one admitted. A lease whose holder asked elsewhere in between (a
// coordinator failed over and back) stays counted until it expires
// (TestLeaseReplacedOnlyByTheNextAsk). Where those slices pass
// MaxAskEntries (or, when the node does not know when it last took a
// lease, every slice of the grant's lifetime does), the ask wants no
// lease and its holder keeps the one it has, which the coordinator keeps
// counting until it expires.
//
// NFR2 is untouched: the coordinator never counts a lease in its window,
// so no denial anywhere ever needs a lease to deny. A lease stranded on an
// idle or dead node costs nothing but the share of Λ it holds until it
// expires: no compliant client is denied because of it
// (TestStrandedLeaseNeverDenies).
//
// NFR1 gains at most Λ: at any instant the hits the leases admitted that
// no node has merged are at most the hits lent on the leases the
// coordinator still counts, at most Λ (a holder's ask both ends its lease
// and brings the coordinator what it admitted). A lease is thus a blind
// share of its holder's, lent for a while: the nodes' blind shares and
// the leases out add up to at most N·b + Λ, whatever each holds.
//
// NFR2 holds exactly: every denial, here or at the coordinator, is by a
// count that never over-counts. A grant is counted by the coordinator
// until its merged slices show it, and never beside them: it is shown once
// the asker's predicted slice holds the predicted count, or once the asker
// has a later slice (it counted the hits in one of the two). A grant whose
// answer was lost is released by the asker (Release) or expires two sync
// intervals and the grace after it was made; until then it is the one
// over-count the scheme has, of h, and only after a lost answer. A check
// decided by the fallback (AllowFallback: the budget, when no answer came
// in time) is not exact either; the cluster layer counts those.
//
// NFR1, for a healthy cluster (every answer in time, every delta merged
// within the grace, one clock): take the last grant g before t. The
// coordinator's count at g included every grant still pending and every
// admission merged by then, and g fitted: those number at most L. What
// its count missed are the admissions no node had merged: each node's
// blind ones, at most b (a blind admission needs U + h <= b, and U counts
// all of the node's unacknowledged admissions), and what the nodes
// admitted blind after g, while their own counts still had room, which b
// also bounds until their next tick's message is merged (the grace), after
// which their counts include g's window; and what the holders of leases
// admitted on them that it had not merged at g or after g, which each
// lease bounds in the same way, by its size, for the leases it counted at
// g (no lease is lent after g, the last grant): at most Λ. Add the hidden
// tails: at most L + N·b + Λ + N·T_node
// (BoundOf's WorstCase), 660 for 600 per minute on 8 nodes and 10 for 10
// per second.
// TestCoordinatedPropertyAgainstOracle checks both halves against the
// exact oracle on random and adversarial multi-node patterns with latency,
// lost answers, duplicated sync messages and a node, lease holder or not,
// that dies (what it admitted after its last tick is lost with it, and
// added to the bound); limitsim measures them on the cluster engine.
//
// When the coordinator cannot answer in time, a node decides alone with
// the per-node budget (ClusterConfig.Budget): it admits at most floor +
// remaining/N of a key that its peers may not know of yet, and the bound
// is the budget's, L + N·f + N·T (f its floor; docs/blind-interval.md
// derives it and its latency chain).
//
// Two coordinators at once: during a change of membership, or while some
// nodes have failed a silent coordinator over to the key's runner-up and
// others not yet (package cluster/engine, "Failover": the first node to
// fail it over tells the others, so that lasts about a sync interval), two
// nodes grant the same key, each counting its own grants. A grant g at either fits its
// count, C + h <= L, and what that count misses is what it missed above
// (each node's U, at most b, and the tails) plus the other coordinator's
// grants that no node had merged by g: grants of the last grant lifetime,
// which the other made only while its own count, never over, had room, so
// at most L, and the leases each lent, at most Λ each. The window then
// holds at most 2L + N·b + 2Λ + N·T_node, and with checks decided by the
// budget meanwhile at most the budget's bound plus L + Λ (Λ is within the
// tolerance): one limit and a lease pool more than without the second
// coordinator, and only until the
// nodes agree again (their next message to each other). NFR2 is not
// touched: every denial is still by a count that never over-counts.
//
// # Routed limits
//
// ClusterConfig.Routing may route a limit (Counter.Routed): its changes
// then go to its keys' coordinators alone (package cluster/engine), and a
// node other than a key's coordinator counts of it only what it admitted
// itself. A routed limit has no blind share: RouteAuto routes it on more
// than MeshNodes nodes when the split would leave each node at most 1,
// which routing takes, and RouteAlways routes every limit with blind
// shares off. So no check is ever admitted on a node's own view of a
// routed key but on a lease: the argument above holds with b = 0, and its
// bound is L + Λ + N·T. A node still denies when its own count alone is
// full (it never over-counts), and asks the coordinator otherwise, whose
// count holds every node's changes within the grace as before. The budget
// of a routed limit keeps to its floor f (withinBudget): with no node
// knowing the count it assumes none of the room is free, so the nodes
// deciding alone admit at most L + (N − 1)·max(1, f) + N·T over a count
// the coordinator knew (BoundOf), and a client at its limit rate never
// meets the floor. That bound is for one round of the nodes deciding
// alone: a node whose asks keep getting lost would take its floor again
// each interval whatever the total, so it also denies what its own
// count plus the others' count, as the coordinator's last answer told it
// within a slice length, cannot hold (heard.go).
//
// # Limits stated per call
//
// A limit whose max comes with each call (an Envoy override, a limit stated
// on /check) has no registered max: it belongs to a family (Family), a
// name with at most N registrations, one per (window, slices) pair, and
// each call derives its Limit with its max (Limit.WithMax). Every node
// declares the family, and Merge and Coordinate register a pair of it on
// first sight of its identity (validated as Limit validates one, in the
// canonical form only, within the N), so a node that never checked a
// pair keeps its peers' counts of it and can coordinate it; the registry
// still grows by at most N per family, whatever arrives.
//
// Where no call is at hand, a family's registration has max MaxLimit,
// never the largest max seen. Merge bounds the slices it accepts from an
// origin by the registration's max (perOrigin), and must not refuse a
// peer's real slices, which were counted under that peer's callers' maxes:
// refusing them would under-count, and NFR1 would fail. Only a max at least
// every caller's on every node is safe, the nodes must agree on it without
// talking, and a largest-seen max differs by node (a node that only merged
// has seen none). The cost: a forged message may grow one key's slices of
// such a limit to 2 × the window in ms per origin instead of about 4 × the
// max (a gossip key keeps forgers out). Hot keys, for anti-entropy, keep
// the max they were found hot with (the call's), so such keys are
// re-sent as others are.
//
// An ask of such a limit states the call's max (Ask.Max; PrepareAsk fills
// it, and Coordinate refuses such an ask without one), and the coordinator
// decides with it, sizing the lease it lends from it. So when every check
// of a key states the same limit L, the argument of "Coordination at the
// margin" holds word for word with L: a denial needs L − h + 1 accepted in
// the window (NFR2), and a window holds at most WorstCase(L) (NFR1);
// under the budget (no answer in time, or a coordinator of an older
// version that drops the ask: package cluster/engine) the budget's bound
// with L.
//
// The same key and pair may be checked with different limits by different
// callers; they share the count, which never over-counts whatever the
// limits. Then:
//
//   - NFR2 holds per check, for its own limit: a check stating L is denied
//     only by a count of at least L − h + 1 accepted requests, here or at
//     the coordinator, or by a remembered denial, which holds only for
//     checks stating at most the max it was denied under (a larger one may
//     fit, and asks again).
//   - NFR1 holds for the largest limit stated: every admission fitted a
//     count of at most its own limit, and the tail, blind share and lease
//     cap it used are those of its limit, each at most those of the
//     largest, L_max; so a window holds at most WorstCase(L_max). A caller
//     stating a smaller L is admitted only while the shared count leaves
//     it room, but the others' admissions count against it: it is not
//     promised (1 + Tolerance) × L of the window for itself, only that its
//     own checks never pass a count over L.
//
// TestStatedLimitPropertyAgainstOracle checks both halves for stated
// limits, mixed ones included, with each node learning the pair from its
// peers before its own first check of it; limitsim's
// TestCoordinatedStatedLimitAgainstOracle does on the cluster engine.
//
// What travels: AppendChanges returns, once per sync interval, the local
// slices opened or grown since the previous call (a slice sent and not
// grown since is not sent again), each as the check that last grew it
// recorded it, so that collecting them reads no key's state; AppendHot
// returns a node's own slices of the keys whose window holds at least
// ClusterConfig.HotShare of their limit, for anti-entropy, from a set the
// counter keeps as counts cross that share, of the keys the node counts
// itself (a key only its peers count gives it nothing to re-send), so its
// cost follows the node's hot keys, not all keys nor the cluster's, and
// AppendHotChanged those of them that may have changed within a given
// span of now: started within a slice length and the span (a slice grows
// only while younger than its slice length), and their origin's newest or
// followed by its next within the span (an origin counts only in its
// newest slice);
// AppendState returns every live slice of an origin, for a peer that
// (re)joins.
//
// Slice starts are read on the origin's clock. If node clocks differ by d,
// a receiver counts a peer's slice for W - d or W + d of its own time: too
// short lets up to d worth of that peer's requests through early (NFR1),
// too long keeps them d too long (NFR2). The cluster layer exports the
// offset it observes per peer so operators see it before it matters. Past
// the cluster layer's MaxClockOffset (limiterd's -max-clock-offset, 1 s by
// default) ahead, a node stops merging that peer's slices instead of misplacing
// them by the offset, and the two then count each other's requests as
// across a partition: at most a limit on each side per window.
//
// A node whose own clock runs ahead by d lets every peer's slice go d
// early, and as a routed key's coordinator (the only node that knows the
// key's total) or as any coordinator at the margin it would grant into
// that room d before the peers' clocks make it. SetClockLead(e) moves the
// end of every window it judges back by e: a slice leaves e later in
// every check, merge, decided ask, sweep and set of changes collected to
// send, while requests are still counted at now. The bounds with it:
//
//   - NFR2. The lead given is the least the askers report, each the
//     largest offset of this node's recent messages at that asker: the
//     clocks' difference less a delay, which is never negative. So e ≤ d
//     against every asker, and a peer's slice is kept at most until its
//     origin's own clock lets it go, never later; this node's own slices,
//     stamped on its clock, are kept e longer than on true time, which is
//     how its peers already keep them (W + d of theirs). On one clock
//     every report is 0 or less, e = 0, and the counter is exactly as
//     without it, whatever the delays.
//   - NFR1. With e = d the peers' slices leave on their time, and the
//     room a clock ahead made early is gone; with e < d (a delay in the
//     reports) what is left is d − e of it, the price of the offset above
//     for the rest.
//
// # Peek
//
// Peek answers the check "would h more hits fit now?" without counting:
// the same window, clamp and retry advice as Allow, on a copy of the view
// that it never writes back, so it creates no state, drops no expired
// slice and remembers nothing. Its answer is Allow's on a single node; in a
// cluster it is the window as this node knows it (own and merged slices,
// pending grants, a remembered denial), never the blind share or the
// budget, which ration admissions, and never Decision.Coordinate.
//
// # Reset
//
// Reset erases a key's counts under some of its limits and returns the
// Reset for the other nodes, which apply it with ApplyReset; in a cluster
// the key's coordinator makes it (package cluster/engine carries it). A
// reset has an instant R, on the clock of the node that made it, and the
// rule is one property of a slice: a slice of (limit, key) that starts
// before R is erased, on every node, and refused by Merge until R has left
// the window (a tombstone per (limit, key), at most 1,024 a shard); one
// that starts at or after R is kept. A node counts its own requests no
// earlier than R, so whatever it counts once it has applied the reset
// survives it everywhere. Requests counted before the reset are erased,
// requests counted after it kept, none counted twice, and the nodes agree
// once they have merged each other's slices: ApplyReset has the argument,
// and what "before" means when clocks differ. NFR1 and NFR2 hold from R on
// as for a key never seen: on one node, the decisions after a reset are
// those of a fresh counter (TestResetSingleNodeIsAFreshStart), and
// TestResetClusterAgainstOracle races resets with checks on nodes with
// skewed clocks over a lossy network. A window that spans R may hold the
// requests of before and after it: that is what a reset is for.
//
// # Memory and the key cap
//
// A (limit, key) pair whose window is empty is dropped, when a check finds it
// so or when Sweep runs. Each limit's pairs in a shard live in one
// open-addressed index over a slab of blocks: a block holds the pair's
// bookkeeping, the key's bytes and its slices, 6 bytes a slice when every
// slice of the pair fits (offset within 4.6 hours of the first, count up
// to 65,535, one of the first 256 origins) and 10 otherwise, each value
// kept exactly; the index costs 8 bytes a slot. A pair at HS1 traffic costs
// about 120 bytes in all (BENCHMARKS.md). Sweep also gives back the memory
// of a flood of keys that has left. Config.MaxKeys caps the pairs tracked
// at once. When a shard is full, a new key first triggers a sweep of
// the shard (at most once a second); if the shard is still full, the request
// is allowed without being counted (Decision.Untracked, Stats.Untracked).
// This keeps NFR2 and NFR3: the cap never rejects anyone and never takes
// state from a tracked key, so every key already tracked keeps its exact
// window and its NFR1 bound. Only keys first seen while the table is full go
// uncounted until room frees up, which operators see in the metric built on
// Stats.Untracked and fix by raising MaxKeys.
//
// # Concurrency and zero value
//
// A Counter is safe for concurrent use. Keys are spread over Config.Shards
// independently locked shards by a seeded hash; a check locks exactly one
// shard, and all limits of one key live in the same shard, which is what
// makes a multi-limit check atomic. Merge alone holds several shards'
// locks at once, a batch of them, always taken in ascending order, and no
// call holds one shard's lock while it waits for another's otherwise, so
// no two calls can deadlock. The zero Counter is not usable; build one with
// New. Limit and Result are plain values.
package counter
