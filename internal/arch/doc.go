// Package arch holds no code: its test checks the import rules that keep
// limiterd's layers apart (ARCHITECTURE.md), so that an arrow that must
// not exist fails `make test` the day it appears rather than in a review.
//
// The rules, and why each holds:
//
//   - counter imports nothing of this module and no network, logging,
//     metrics or operating-system package; it never reads the clock and
//     starts no goroutine. It is the pure core that every bound is proven
//     on: time is an argument of every call, as golang.org/x/time/rate's
//     is, so a test, the simulator and a node run the same code.
//   - limiter (rules over counter) never reads the clock, starts no
//     goroutine and imports no network, cluster or metrics package: the
//     daemon and the simulator decide with the same limiter.
//   - cluster/engine, the cluster's state machine, imports neither
//     memberlist nor the network nor package cluster (its adapter), never
//     reads the clock and starts no goroutine: events in, messages out,
//     as etcd's raft; the simulator drives the same engine as a node.
//   - The frontends (httpapi, rls) import neither counter nor cluster nor
//     the engine: they turn requests into decision.Input and answers back,
//     and whatever decides (alone or clustered) stays behind decision.
//   - internal/oracle imports nothing of this module: it is the judge of
//     the counter's properties and must not share the code it judges.
//   - Nothing imports a command (cmd/...): a main package holds flags,
//     wiring and output, and logic another package needs is in the wrong
//     place there.
//   - The client library (client, client/middleware) imports nothing of
//     the server: a service that asks limiterd does not build the daemon.
//     client/local, the in-process backend, is built on the limiter on
//     purpose and is the exception.
//
// A function whose name ends in Now (Counter.AllowNow, Limiter.CheckNow)
// may read the clock: it is a shorthand for its sibling called with
// time.Now(), as x/time/rate's Allow is for AllowN.
package arch
