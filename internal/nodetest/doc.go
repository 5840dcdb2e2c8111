// Package nodetest starts limiterd nodes for tests, the one way every
// test that needs a node gets one:
//
//   - in-process (Server, Serve, Decider, Handler): the daemon's own
//     limiter, Decider and httpapi handler over a rule file given as text,
//     deciding at a clock the test gives; what limiterd answers,
//     reproducibly, without a process (limitload's tests,
//     client/internal/limiterdtest for the client packages);
//   - as processes (Start, Cluster, Proc): the limiterd binary, built once
//     per test binary (Build), N of them on 127.0.0.1 with ports found free
//     or each in a node of a network lab (internal/netlab), node-0 the seed
//     the others join; started, stopped (SIGTERM), killed, signalled,
//     restarted with new arguments, asked over HTTP (Get, Check, Members,
//     Metrics through internal/promtest) and gRPC (RLS), and stopped when
//     the test ends, their output logged if it failed (the e2e packages).
//
// cluster's in-process memberlist harness (cluster/harness_test.go) is a
// different thing, nodes of package cluster without the daemon, and
// cmd/limiterd's tests run the daemon's run function in-process; neither
// uses this package.
//
// Beside them: the programs the tests run (Build, and DebianProgram,
// which installs Debian's package of a missing program as root or skips
// the test), Eventually, a bound on waiting for an event, LockedBuffer, a
// buffer a process writes while the test reads it, Figures, the line a
// fault scenario reports, and DerivedBound, the counter's bound the
// cluster tests hold the nodes to.
//
// Concurrency: a Cluster's methods, and the methods that take a
// testing.TB, are called from the test's goroutine; a Proc's Get, Members,
// ShouldRateLimit, Signal, ResidentBytes and OpenFiles from any. Build and DebianProgram keep, for the test binary's
// life, what they built and installed (a package-level cache: each
// program once, whichever test asks first).
package nodetest
