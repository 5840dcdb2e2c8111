// Package netlab builds a small network of Linux network namespaces for
// fault tests, and breaks it on demand: one namespace per node, each with
// a veth pair to a bridge in a hub namespace of the lab's own, addresses
// from a private range that exists only inside those namespaces, and
// faults made by nftables rules inside the nodes' namespaces (drop between
// groups, drop one direction, drop a share of packets at random).
//
// The machine's own namespace is never changed: no address, route or rule
// is added to it. The test process reaches the nodes through
// Lab.DialContext, which opens its sockets inside the hub namespace, and
// starts programs in a node's namespace with Lab.Command. Faults apply only
// between nodes: the hub's address (the test's clients) is never dropped.
//
// It needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN), the ip command of
// iproute2, and the nft command of nftables for faults. New returns an
// error wrapping ErrUnavailable when the machine refuses namespaces, so a
// test can say so and skip. Close removes everything New made, and New
// first removes what a lab of a dead process left behind.
//
// A Lab's methods are safe for concurrent use; the zero value is not
// usable, New makes a Lab.
package netlab
