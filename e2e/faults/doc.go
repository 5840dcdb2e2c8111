// Package faults holds the fault scenarios of docs/faults.md that need a
// network: 8 limiterd processes, each in a network namespace of its own
// (internal/netlab), so that nftables can partition them, drop one way
// and lose packets between them as a real network does (on loopback
// every packet arrives), while limitload's driver (internal/loadgen)
// sends compliant and abusive clients' checks from the lab's hub and
// internal/oracle judges every answer. Scenario 1 is a partition, 2 loss,
// 3 restarts, 4 a hot key's coordinator cut off, 5 a clock ahead, and 7
// a coordinator stopped with SIGSTOP (6, a flood of keys, needs no
// network: it is in package e2e).
//
// They need root (namespaces, nftables; ip and nft come from Debian's
// packages when missing) and skip, saying why, where the machine refuses
// namespaces. Each runs in a lab of its own, in parallel with the others:
// the package takes about 8 minutes. Each logs one FIGURES line, which
// docs/faults.md quotes, and appends it to the file LIMITERD_FIGURES
// names (make race prints it).
package faults
