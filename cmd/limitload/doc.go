// Command limitload is a load and accuracy driver for running limiterd
// nodes. It sends GET /check over keep-alive HTTP/1.1 connections, many in
// flight, each request at its scheduled instant whatever the answers (open
// loop), spread over the targets at random, round-robin (over all
// requests, or each key's in turn) or by the seed study's LCG; and it
// judges the answers against the rule the nodes apply: the most requests
// of one key accepted in any window-long interval (NFR1: at most 1.1 x
// the limit) and the false rejections (NFR2: a request rejected while
// fewer than the limit of its key were accepted in the window before it),
// computed from its own log of send instants.
//
//	limitload --targets 127.0.0.1:8081,...,127.0.0.1:8088 --pattern edge-burst --limit 600 --window 10s
//	limitload --targets ... --pattern keys --keys 200000 --rate 40000 --duration 60s --limit 600 --window 60s --json
//
// "limitload flood" sends unique keys, each once, as fast as a node takes
// them, over Envoy's rate limit protocol (64 descriptors a call), and prints
// one JSON line: the cost of a flood of new clients (docs/faults.md).
//
// "limitload -h" lists every flag. Targets outside 127.0.0.0/8 and ::1 are
// refused unless --allow-remote is given (host names are resolved once,
// and every address must be loopback). Before the run a preflight check
// asks each target once for a probe key (a run key with "-preflight"
// appended) and refuses to go on unless every one answers 200 or 429 with a
// RateLimit-Policy holding --limit per --window (--preflight=false skips
// it).
//
// The driver itself, its patterns, its clients and its analysis, is
// package internal/loadgen ("go doc ./internal/loadgen"): limitload is its
// flags and its output.
//
// # Output
//
// Every --progress (1 s) a line on stderr: elapsed time, answers per second
// in the last interval, answers so far by status, transport errors, the
// p99 latency of the last interval and how far behind schedule the
// generator wrote requests in it. At the end the report on stdout, as text
// or with --json as one JSON object (stable names; Version changes if a
// field changes meaning or disappears):
//
//	version              1
//	run_id               the run id in the generated keys
//	targets              the targets as IP:PORT
//	spread, pattern      as given
//	limit, window_ms     the rule the answers are judged against
//	seed_scale           window_ms / 60000: the factor applied to the seed's instants
//	factor               --factor
//	rate                 --rate (random: K x the limit rate unless given; 0 for the seed's patterns)
//	keys, zipf_s         keys of the pattern (1 for single-key patterns) and the skew (0 uniform)
//	duration_ms          length of the schedule
//	client, conns, seed  as given
//	interrupted          Ctrl-C ended the run; the figures are of what was answered
//	cut_at_deadline      the generator was still behind schedule at the deadline (duration + timeout
//	                     after the start) and stopped: the figures are of what was answered
//	start_unix_ms        the instant the schedule started (instant 0)
//	elapsed_ms           from the start to the last answer
//	scheduled            arrivals of the schedule (up to Ctrl-C: those dispatched to a target)
//	answered             requests sent and answered or failed
//	unsent               scheduled - answered: dropped by Ctrl-C or the deadline
//	target_rate          (scheduled-1) / (last scheduled instant - first), per second
//	achieved_rate        (answered-1) / (last send instant - first scheduled instant), per second
//	latency_ms           {p50,p90,p99,p99_9,max,mean}: from writing the request to the end of its answer
//	response_ms          the same from the scheduled instant (includes time behind schedule: no coordinated omission)
//	behind_schedule_ms   the same of how late requests were written after their instant
//	latency_by_phase     with --phase D: 10 bins of the send instant's phase in wall-clock multiples of D,
//	                     each {from_ms, to_ms, requests, p50, p99, max} of latency; else []
//	behind_schedule      true when behind_schedule_ms.p99 exceeds 10 ms: the figures are not those of the pattern
//	status               answers by HTTP status ("200", "429", ...) and "error" for transport errors
//	fail_open            answers carrying X-RateLimit-Error (allowed because of an internal error)
//	generator_cpu_s      limitload's own user+system CPU time
//	analysed             requests in the accuracy analysis
//	log_truncated        more than --max-log requests: the later ones were not analysed
//	accuracy             the analysis:
//	  keys                        keys answered at least once
//	  max_in_window, max_ratio    the most 200s of one key in any [t, t+window) and / limit
//	  max_key                     that key
//	  keys_over_limit             keys with max_in_window > limit
//	  keys_over_1_1               keys with max_ratio > 1.1 (NFR1 broken)
//	  false_rejections            429s sent while fewer than limit 200s of the key were sent in (t-window, t]
//	  keys_with_false_rejections  keys with at least one
//	  worst                       up to --worst keys, the highest max_in_window first, each
//	                              {key, requests, accepted, rejected, other, max_in_window,
//	                               max_window_at_ms, ratio, false_rejections}
//	                              (max_window_at_ms: send instant, ms after the start, of the
//	                              first request of that busiest interval)
//	  most_false_rejections       up to --worst keys with false rejections, the most first
//
// Percentiles come from a log-linear histogram (1.6 % precision, fixed
// memory); the accuracy analysis from a log of 24 bytes per request, at
// most --max-log of them.
//
// --dry-run prints the schedule as a "limitsim replay" trace and sends
// nothing; --trace-out FILE writes the run as it happened (see package
// loadgen, "Traces for limitsim").
package main
