// Command limitsim runs the seed design study's experiments
// (seeds/000_3c268723d32e1f47.txt, "Reference measurements" in SPEC.md) on
// limiterd's own code. Everything runs on a simulated clock: instants are
// integers of milliseconds handed to the counter as time.UnixMilli(ms), so
// every run is deterministic and takes no real time.
//
// Usage:
//
//	limitsim seed
//	limitsim replay [--limit N] [--window D] [--slices K] [--decisions] [--trace FILE]
//	                [--nodes N [--sync D] [--latency D] [--skew D] [--stagger D]
//	                 [--seed S] [--budget=true|false] [--budget-floor F] [--dup]]
//	limitsim burst
//	limitsim help [COMMAND]
//
// "limitsim -h" and "limitsim COMMAND -h" explain every flag. Help goes to
// standard output; errors go to standard error. The exit status is 0 on
// success, 1 for a runtime error (an unreadable or malformed trace) and 2
// for a usage error (an unknown command or flag, an invalid limit).
//
// # seed
//
// seed prints the seed's window-algorithm table (hiz/pencere.mjs): one
// client, 180 s of model time, a limit of 600 per 60 s, and for each arrival
// pattern the requests accepted and rejected, "max 60 s" (the most accepted
// requests in any interval [t, t+60 s), the seed's enYogunPencere) and its
// ratio to the limit. The rows "fixed window", "12-slice sliding" and "token
// bucket (60, 10/s)" come from small comparison models (models.go) that
// follow the JavaScript operation for operation, the token bucket in float64,
// and reproduce the seed's numbers exactly on its three patterns; a test pins
// every one of them. The row "limiterd" runs the real counter package with
// counter.DefaultConfig() and a limit of 600 per 60 s in 12 slices.
//
// A fourth pattern is not in the seed: 600 requests in the last 100 ms of
// the slice [0, 5 s), then 600 at 60 s and 600 at 120 s. The seed's window
// numbers slices by epoch (floor(t / 5 s)) and counts slices d-11..d, so at
// 60 s it forgets requests that are only 55 s old and lets twice the limit
// into [4.9 s, 60.1 s). limiterd's slices carry their own start instant and
// count until that start is a full window old, which bounds any window-long
// interval by 1.1x the limit (see package counter); it rejects the second
// burst.
//
// Then come the seed's distributed tables (hiz/dagitik.mjs): 8 nodes, one
// 60 s window, request i of a client at i/rate seconds on the node the
// seed's 32-bit LCG draws (s = s*1103515245 + 12345 mod 2^32, node =
// floor(s/2^32 x 8), seed 20260730); a central counter, a quota split of
// 600/8 per node and a delayed sync every 0.2 s at 10/s and 90/s, then the
// delayed sync at 90/s every 0.2, 1, 2 and 5 s. distributed.go replays the
// JavaScript operation for operation (float64 instants, the sync test
// t - lastSync >= interval, the seed's touch count and its definition of
// false rejections) and a test pins every number. The rows "limiterd, budget"
// and "limiterd, no budget" run the same requests, at floor(i*1000/rate) ms,
// on the same nodes through the simulated cluster below; their touches are
// the delta messages the Syncers produced and their false rejections those
// of the replay summary.
//
// # The simulated cluster
//
// sim.go runs N nodes, each with limiterd's real counter.Counter in cluster
// mode (counter.SetCluster with Nodes = N, the sync interval and the
// budget), a limiter.Limiter with one rule (limiter.New, so the real
// decision path runs) and a cluster.Syncer. One simulated clock, in integer
// milliseconds of true time, drives them; node i reads it plus its clock
// offset. Every sync interval each node that counted something since its
// last tick calls Syncer.Tick with its own time, and each message is
// delivered to every other node's Syncer.Receive after the latency (a tick
// with nothing to send changes no decision and is skipped; limiterd ticks
// every interval, and a test checks that both give the same decisions). At one instant, ticks run
// first (in node order), then deliveries (in send order), then the request:
// every run is deterministic. Options: --skew D spreads the nodes' clock
// offsets evenly over [-D, +D]; --stagger D makes node i tick i x D / N
// after node 0 (real nodes' timers have unrelated phases); --dup delivers
// every message a second time, two intervals and 1 ms late.
//
// # replay
//
// replay reads a trace, one request per line,
//
//	TIME_MS KEY
//
// where TIME_MS is a decimal integer of milliseconds in [0, 2^53-1], never
// smaller than the line before, and KEY is valid UTF-8 without whitespace.
// Blank lines and lines starting with # are skipped. The trace comes from
// standard input or from --trace FILE. It runs every request through a
// fresh counter (counter.DefaultConfig(), one limit of --limit per --window
// in --slices slices; defaults 600, 60s and 12, the seed's HS3 and HS7) as
// one Allow of one hit at time.UnixMilli(TIME_MS).
//
// All output goes to standard output. With --decisions it first prints one
// line per request, in input order:
//
//	TIME_MS KEY allow
//	TIME_MS KEY deny
//
// Then comes the summary, one "# NAME VALUE" line each, always these names
// in this order, so that grep -v '^#' keeps only the decisions:
//
//	# requests 3600             requests in the trace
//	# accepted 1800             allowed, untracked ones included
//	# rejected 1800             denied
//	# untracked 0               allowed uncounted: the counter was at MaxKeys
//	# keys 1                    distinct keys
//	# limit 600                 the limit replayed ...
//	# window_ms 60000           ... its window ...
//	# slices 12                 ... and its slices
//	# max_in_window 600         most accepted for one key in any [t, t+window)
//	# max_in_window_key client  that key; the smallest on a tie, "-" if none
//	# max_in_window_ratio 1.000 max_in_window / limit; NFR1 wants <= 1.100
//
// With --nodes N the trace runs on the simulated cluster (N nodes, the
// limit of --limit, --window and --slices as the rule). A line may carry a
// third field, the node index: "TIME_MS KEY NODE" with NODE in [0, N); a
// line without it goes to the node the seed's LCG draws (seeded by --seed).
// Without --nodes a third field is an error, and the output is exactly as
// above. With --nodes, decision lines are "TIME_MS KEY NODE allow|deny",
// and the summary goes on, after the lines above, with
//
//	# nodes 8                       the cluster ...
//	# sync_ms 200                   ... its sync interval ...
//	# latency_ms 0                  ... message delay ...
//	# skew_ms 0                     ... clock spread (offsets in [-D, +D]) ...
//	# budget true                   ... and per-node budget
//	# budget_floor 1
//	# seed 20260730                 the LCG's seed
//	# false_rejections 0            rejected while fewer than the limit of that
//	                                key were accepted in (t-window, t] (NFR2)
//	# sync_deltas 250               messages Tick produced (each goes to N-1 peers)
//	# sync_messages 1750            messages delivered
//	# sync_bytes 88144              bytes delivered
//	# sync_duration_ms 60000        the sync intervals the requests span
//	# sync_messages_per_node_s 3.6  sync_messages / N / duration
//	# sync_bytes_per_node_s 183.6   sync_bytes / N / duration
//	# max_peer_offset_ms 0          largest |offset| a Syncer estimated for a
//	                                peer (clock difference plus latency)
//
// Times in the summary (max_in_window, false rejections) are true time.
//
// # burst
//
// burst evaluates the cross-node burst and the per-node budget (SPEC.md,
// "Where the seed's own design falls short", items 3 and 4) on the seed's
// cluster: 8 nodes, 0.2 s sync, 600 per 60 s, one client for 180 s. It prints
// the most admitted in any 60 s interval against client rates from 10/s to
// 10,000/s, the false rejections of compliant clients, each with the budget
// off, with floors 0.5, 1, 2 and 4, and with floor 1 but no delivery grace,
// the bound derived for any rate, and tables that vary the tick phases, the
// clock skew (with ticks at one true instant, then on each node's clock, as
// limiterd ticks) and the latency (with three adversarial patterns on chosen
// nodes: the post-tick burst, the latency chain and a burst right after the
// grace).
// docs/blind-interval.md explains the mechanism and the numbers. The runs
// are independent and spread over GOMAXPROCS goroutines; each writes its own
// result slot, so the output does not depend on scheduling.
package main
