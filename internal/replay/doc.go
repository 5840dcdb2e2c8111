// Package replay replays a request trace through limiterd's counter on a
// simulated clock, on one node (Replayer) or on the simulated cluster of
// package internal/clustersim (RunCluster), and writes the summary of
// limitsim replay. It also reads the access logs of a what-if replay
// (AccessLogReader; package internal/whatif runs them).
//
// # Traces
//
// A trace has one request per line,
//
//	TIME_MS KEY [NODE]
//
// where TIME_MS is a decimal integer of milliseconds in [0, 2^53-1]
// (MaxTimeMs), never smaller than the line before, KEY is valid UTF-8
// without whitespace, and NODE, on a cluster only, a node index in [0, N)
// (a line without one goes to the node the seed's LCG draws). Blank lines
// and lines starting with # are skipped; a line is at most MaxLineBytes.
// A malformed line is a *LineError naming it. On one node each request is
// one Allow of one hit at time.UnixMilli(TIME_MS) on a fresh counter
// (counter.DefaultConfig(), one limit).
//
// An access log has lines "TIME KEY [NODE]" where TIME is either
// milliseconds, as in a trace, or an RFC 3339 timestamp with optional
// fractional seconds and any offset ("2026-07-28T09:00:00.250Z"), taken
// relative to the first line's and truncated to the millisecond. A log
// uses one format; no line may be earlier than the one before (timestamps
// compare as instants). KEY is at most limiter.MaxKeyBytes of UTF-8.
//
// # The summary
//
// With decisions on, one line per request comes first, in input order:
// "TIME_MS KEY allow|deny", on a cluster "TIME_MS KEY NODE allow|deny".
// Then the summary, one "# NAME VALUE" line each, always these names in
// this order, so that grep -v '^#' keeps only the decisions (WriteSummary):
//
//	requests             requests in the trace
//	accepted             allowed, untracked ones included
//	rejected             denied
//	untracked            allowed uncounted: the counter was at MaxKeys
//	keys                 distinct keys
//	limit                the limit replayed ...
//	window_ms            ... its window ...
//	slices               ... and its slices
//	max_in_window        most accepted for one key in any [t, t+window)
//	max_in_window_key    that key; the smallest on a tie, "-" if none
//	max_in_window_ratio  max_in_window / limit; NFR1 wants <= 1.100
//
// On a cluster it goes on with (WriteClusterSummary):
//
//	nodes                      the cluster ...
//	sync_ms                    ... its sync interval ...
//	latency_ms                 ... message delay ...
//	skew_ms                    ... clock spread (offsets in [-D, +D]) ...
//	budget                     ... and per-node budget
//	budget_floor
//	seed                       the LCG's seed
//	false_rejections           rejected while fewer than the limit of that
//	                           key were accepted in (t-window, t] (NFR2)
//	sync_deltas                messages Tick produced (each goes to N-1 peers)
//	sync_messages              messages sent, every purpose: deltas, anti-entropy,
//	                           heartbeats, hellos, catch-ups (as limiterd_sync_messages_total)
//	sync_bytes                 bytes of those messages
//	sync_duration_ms           the sync intervals the requests span
//	sync_messages_per_node_s   sync_messages / N / duration
//	sync_bytes_per_node_s      sync_bytes / N / duration
//	max_peer_offset_ms         largest |offset| an Engine estimated for a
//	                           peer (clock difference plus latency)
//	coordinate                 the key's coordinator decides at the margin
//	                           (false: the budget alone) ...
//	deadline_ms                ... within this deadline
//	decided_here               checks decided by the node alone ...
//	decided_coordinator        ... by the key's coordinator ...
//	decided_fallback           ... by the budget: no answer in time
//	decided_on_lease           of decided_here, on a lease the key's
//	                           coordinator lent the node
//	false_rejections_fallback  of false_rejections, the fallback's (the
//	                           budget is not exact; the others are)
//	coord_asks                 asks sent to a coordinator (lost ones included)
//	coord_ask_bytes            their bytes
//	coord_answers              answers the coordinators sent
//	coord_answer_bytes         their bytes
//	coord_releases             releases after a missing answer
//	coord_release_bytes        their bytes
//
// The coordination's messages are counted apart: the sync_ figures are the
// sync traffic alone, as without the coordinator. Times in the summary
// (max_in_window, false rejections) are true time. BENCHMARKS.md has a
// summary of the seed's 90/s client on 8 nodes.
//
// # What holds
//
// A replay is deterministic: the same trace, configuration and seed give
// the same output byte for byte. Without the budget no false rejection
// happens on a cluster, whatever the nodes, ticks and duplicated
// deliveries (FuzzClusterReplay); on one node nothing more than the
// limit's tolerance is accepted in a window (FuzzTraceReader), and a
// cluster of one node decides exactly as one node does.
//
// # Concurrency
//
// Everything runs on the calling goroutine; readers and Replayers are
// single-use and not safe for concurrent use.
package replay
