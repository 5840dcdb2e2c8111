// Package adminapi is limiterd's admin API: read a key's counts without
// counting anything, and reset a key on every node. It is an HTTP handler
// of its own, for a listener of its own (limiterd's -admin-addr, off by
// default): never mounted beside /check, whose callers are clients to be
// limited, not operators.
//
// # Requests
//
// The key and the rule are query parameters, as on /check, because a key
// may hold any character, "/" included:
//
//	GET    /v1/keys?key=K[&rule=R]   the key's window under each limit of its rule
//	DELETE /v1/keys?key=K[&rule=R]   reset the key: every node forgets its counts
//
// The rule is the one /check would decide the key by: the one named, else
// the first whose pattern matches the key, else the default rule. Bad
// input is a 400 with {"error":"..."}, validated by the decision layer
// and the limiter exactly as /check validates it, in the same words: a
// missing, empty, over-long or non-UTF-8 key, an unknown rule, an unknown
// or repeated parameter. Another method is a 405, another path a 404.
//
// GET answers 200 with, per limit of the rule, its policy name, limit and
// window, the count in the window and what remains, and the time until
// the window is empty (reset_ms), as this node knows it: its own slices
// and those merged from its peers, which another node's view differs
// from by what the two have not merged of each other yet (a sync interval
// in a healthy cluster). It names the node that answered and the key's
// coordinator. A key no rule governs is never counted: rule "" and no
// limits.
//
// DELETE resets the key under every limit of its rule through the key's
// coordinator (package cluster, Node.Reset; the argument that nothing
// counted before the reset comes back and nothing is counted twice is
// package counter's, Counter.ApplyReset). It waits at most
// Config.ResetTimeout for the coordinator's answer and then for every node
// it told, and answers 200 with the reset instant, the coordinator, the
// nodes that applied the reset, those that refused it and why, and those
// that did not confirm in time (unreachable, or of a release without
// resets, which drops the message: during a rolling upgrade a reset
// reaches only the nodes that know it, and this list says which did not).
// When the coordinator does not answer, or refuses, the answer is a 503
// and claims nothing: the reset may have been applied on some nodes or on
// none, and asking again is safe. A key no rule governs has nothing to
// reset: 404. On a single node the reset is applied at once and the
// answer has no node lists.
//
// # Logs and metrics
//
// A reset is logged at INFO (a failed one at WARN) with its rule, its
// outcome and a hash of the key, never the key: a key may be an API key or
// an address, and limiterd logs none (package decision). The hash is the
// first 8 bytes of the key's SHA-256, enough to tell two resets apart or
// to confirm a key one holds; it does not hide a key from one who can try
// every candidate (an address), so the log is no place for secrets
// either. limiterd_admin_resets_total{result} counts resets by outcome:
// applied (by every node told), partial (by the coordinator, not by every
// node told) and failed. Inspecting counts and logs nothing.
//
// # Concurrency
//
// An API is safe for concurrent use; its Keys must be too (cluster.Node
// and Alone are). Build it with New; the zero value is not usable.
package adminapi
