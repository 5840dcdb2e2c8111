// Package seedstudy reruns the seed design study's experiments
// (seeds/000_3c268723d32e1f47.txt, "Reference measurements" in SPEC.md) on
// limiterd's own code, on a simulated clock: instants are integers of
// milliseconds handed to the counter as time.UnixMilli(ms), so every run
// is deterministic and takes no real time. limitsim seed prints its tables.
//
// # The window table
//
// Table is the seed's window-algorithm table (hiz/pencere.mjs): one
// client, 180 s of model time, a limit of 600 per 60 s, and for each
// arrival pattern (Patterns) the requests accepted and rejected, "max 60 s"
// (the most accepted requests in any interval [t, t+60 s), the seed's
// enYogunPencere) and its ratio to the limit. The rows "fixed window",
// "12-slice sliding" and "token bucket (60, 10/s)" come from small
// comparison models (FixedWindow, SeedSliding, TokenBucket) that follow the
// JavaScript operation for operation, the token bucket in float64, and
// reproduce the seed's numbers exactly on its three patterns; a test pins
// every one of them. The row "limiterd" runs the real counter package with
// counter.DefaultConfig() and a limit of 600 per 60 s in 12 slices.
//
// A fourth pattern is not in the seed (SliceEnd): a full limit in the last
// 100 ms of the slice [0, 5 s), then one at 60 s and one at 120 s. The
// seed's window numbers slices by epoch (floor(t / 5 s)) and counts slices
// d-11..d, so at 60 s it forgets requests that are only 55 s old and lets
// twice the limit into [4.9 s, 60.1 s). limiterd's slices carry their own
// start instant and count until that start is a full window old, which
// bounds any window-long interval by 1.1x the limit (see package counter);
// it rejects the second burst.
//
// # The distributed tables
//
// DistTables are the seed's distributed tables (hiz/dagitik.mjs): 8 nodes,
// one 60 s window, request i of a client at i/rate seconds on the node the
// seed's 32-bit LCG draws (package internal/seed); a central counter, a
// quota split of 600/8 per node and a delayed sync every 0.2 s at 10/s and
// 90/s, then the delayed sync at 90/s every 0.2, 1, 2 and 5 s.
// SeedDistributed replays the JavaScript operation for operation (float64
// instants, the sync test t - lastSync >= interval, the seed's touch count
// and its definition of false rejections) and a test pins every number.
// The rows "limiterd, budget" and "limiterd, no budget"
// (LimiterdDistributed) run the same requests, at floor(i*1000/rate) ms, on
// the same nodes through the simulated cluster of package
// internal/clustersim, without the coordinator; their touches are the
// delta messages the Engines produced and their false rejections the
// requests rejected while fewer than the limit were accepted in the window
// before.
//
// # Concurrency
//
// Everything here runs on the calling goroutine. A Model is single-client
// and single-use; Table and DistTables build fresh ones on every call.
package seedstudy
