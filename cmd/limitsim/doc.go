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
package main
