// Package loadgen is limitload's driver: it sends GET /check to running
// limiterd nodes over keep-alive HTTP/1.1 connections, many in flight,
// each request at its scheduled instant whatever the answers (open loop),
// spread over the targets at random, round-robin (over all requests, or
// each key's in turn) or by the seed study's LCG; and it judges the answers against the rule the nodes apply: the
// most requests of one key accepted in any window-long interval (NFR1: at
// most 1.1 x the limit) and the false rejections (NFR2: a request rejected
// while fewer than the limit of its key were accepted in the window before
// it), computed from its own log of send instants. cmd/limitload is its
// flags and its output (the report's fields are documented there); the
// end-to-end tests drive clusters with it too.
//
// A run is a Config (DefaultConfig, then Validate), Run, and the Result's
// Report; Preflight checks the targets first, WriteSchedule prints a
// schedule without sending it, Flood sends unique keys over Envoy's rate
// limit protocol, and ServeNoop serves the no-op /check a run's ceiling is
// measured against. Targets outside 127.0.0.0/8 and ::1 are refused unless
// AllowRemote (host names are resolved once, and every address must be
// loopback).
//
// # Patterns
//
// steady, edge-burst and intermittent are the seed design study's window
// patterns (SPEC.md, "Reference measurements"), laid out from Limit N and
// Window W instead of 600 and 60 s: every instant of the seed is scaled by
// W/60 s, and its 5 s slice becomes W/12. With the defaults they are
// exactly the seed's (a test pins the counts and the instants to the
// millisecond). steady is request i at i*W/(K*N) for K = Factor, for 3
// windows (the seed's 180 s) or Duration; the seed's distributed
// experiment is steady at 1x and 9x for one window (Duration W) with
// SpreadLCG. random is a Poisson process on one key; keys is a Poisson
// process of Rate in total over Keys keys drawn by Zipf(ZipfS), the
// many-keys mode of HS1/HS2.
//
// Generated keys carry the run id (limitload --run-id, by default from the
// clock), so that every run starts from empty windows. The analysis
// assumes it does.
//
// streams has no flag: a program gives Config.Streams, each a rate of
// requests evenly spaced (or Poisson) on one key or on many keys drawn by
// Zipf, merged in time order, with their keys as given. The end-to-end
// tests drive clusters that way: compliant and abusive clients at their
// own rates, or a bulk of keys beside a few judged ones.
//
// # Clients
//
// ClientRaw (the default) is this package's own minimal HTTP/1.1 client:
// one connection per worker, the request written from a reused buffer and
// the answer parsed for its status, its framing and X-RateLimit-Error
// (rawhttp.go). ClientHTTP is net/http with a Transport tuned for it (a
// connection per worker, no compression, no HTTP/2). Both keep Conns
// connections per target; a request waits in its target's queue when all
// are busy, which shows as "behind schedule" (and, with MaxLate, drops it).
//
// A program can also dial the connections itself (Config.Dial: a network
// namespace's dialer), take targets out of the spread while the run goes
// on (Config.Available: a node being restarted), and see every request as
// it is answered (Config.Observe), to judge the answers its own way.
//
// # Traces for limitsim
//
// WriteSchedule (limitload --dry-run) prints the schedule as a "limitsim
// replay" trace, "TIME_MS KEY NODE" with the target the spread picks (the
// same one a run with the same Seed and Spread uses), and sends nothing;
// Result.WriteTrace (--trace-out FILE) writes the run as it happened (send
// instants, targets). "limitsim replay --nodes 8 --trace FILE --limit N
// --window W" then gives the simulated cluster's figures for the same
// requests.
//
// # Concurrency
//
// Run's goroutine schedules (and asks Config.Available); Conns workers
// per target send, each on its own connection; both call Config.Observe;
// one goroutine prints progress.
// Every one of them ends before Run returns, Ctrl-C (ctx) or not. Config
// and Report are plain values; the zero Config is not valid (start from
// DefaultConfig). A Result is read after Run returns, by one goroutine at
// a time or several reading.
package loadgen
