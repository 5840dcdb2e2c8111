// Package whatif is the what-if replay of limitsim replay --rules: an
// access log (package internal/replay reads it) runs through limiterd's
// real limiter with a rule file — its rule matching, its several limits
// per rule (a request counts against all of them only when all have room)
// and its shadow mode — on one node or on the simulated cluster of package
// internal/clustersim, with every node running the rules. The report says,
// per rule, what would have been rejected and whom it would have hit: a
// user replays yesterday's traffic against the rules in force and against
// a change, and compares.
//
// The report (Write): a line with the requests, keys and time span, the
// cluster if any, then one row per rule in file order — mode (enforce or
// shadow), match ("(default)" for the default rule), limits, requests,
// allowed, rejected, would reject (shadow rules only: they allow
// everything, so what they would have rejected is counted apart), keys and
// keys rejected (keys with at least one rejection or would-be rejection) —
// a row "(no rule)" for keys no rule governs, which are unlimited, and a
// total. Then, for each rule that rejected anything: how many of its
// requests and keys, for a rule with several limits how often each had no
// room (a rejection can find several full), and its top keys (Config.Top)
// by rejections, ties by key, each with its requests, its share rejected
// and the TIME of its first rejection as written in the log. With
// Config.Decisions the report is preceded by one line per request,
// "TIME KEY [NODE] RULE VERDICT", RULE "-" for none and VERDICT one of
// allow, deny, shadow-deny (allowed; the shadow rule would have denied)
// and unlimited: diff two runs to see which requests a change flips.
//
// cmd/limitsim/testdata/whatif holds an example, which README.md walks
// through: ten minutes of a site's traffic, the rules in force and a
// proposed change.
//
// # What holds
//
// A what-if run with one default rule accepts exactly what the plain
// replay of the same limit accepts, on one node and on the cluster: the
// rule set adds matching, not a different count. The report does not
// depend on map order: two runs print the same bytes.
//
// # Concurrency
//
// Run works on the calling goroutine and builds a fresh limiter, or a
// fresh simulated cluster, every time.
package whatif
