// Package soak holds the soak (issue 12): 8 limiterd processes under half
// the HS2 rate this machine sustains, from limitload's driver
// (internal/loadgen), one node restarted every minute, for
// LIMITERD_SOAK_DURATION; it runs only with that set (make soak, not in
// CI). Each minute it records what grows when something leaks (resident
// memory, goroutines, open descriptors), what the clients see (latency,
// 5xx, errors) and what the limiter decides for a few judge keys whose
// whole decision logs it keeps (internal/oracle). It rewrites
// docs/img/soak.svg and the Soak section of docs/faults.md, then holds
// the run to the README's promises.
package soak
