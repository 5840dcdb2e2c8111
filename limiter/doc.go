// Package limiter applies a rule set to requests: it finds the rule that
// governs a client key, checks the key against every limit of that rule in a
// counter.Counter, and reports the decision with what the caller needs for
// its response headers (remaining, retry-after, reset, per-limit policy).
//
// Like package counter it is a pure core: it never reads the clock (Check
// takes the time; CheckNow is the one convenience that does), starts no
// goroutines and does no I/O except Load reading a rule file.
//
// # Rule file
//
// A rule file is YAML with one top-level field, "rules", a list of rules:
//
//	rules:
//	  - name: default        # required; ASCII letters, digits and "-_.:"
//	    limit: 600           # requests per window, 1..2147483647
//	    window: 60s          # a Go duration, whole milliseconds, 1ms..720h
//	    slices: 12           # optional, default 12 (HS7), 1..3600, each >= 1ms
//	  - name: premium
//	    match: "premium:*"   # optional key pattern
//	    limit: 6000
//	    window: 60s
//	    shadow: false        # optional: count and report, but always allow
//	  - name: api            # several limits on one key
//	    match: "api:*"
//	    limits:
//	      - {limit: 10, window: 1s}
//	      - {limit: 600, window: 60s, slices: 12}
//
// A rule has either limit and window (and optionally slices) or a limits
// list of 1 to counter.MaxLimitsPerCall entries with distinct windows, never
// both. A window shorter than 12ms defaults to one slice per millisecond.
// Unknown fields are errors, so a typo ("limt") cannot silently drop a
// limit. Names must be unique, at most one rule may omit match (the default
// rule), and two rules may not have the same pattern (the later one could
// never match). Parse reports every problem it finds, each as
// "file:line: rule "name": field "f": what is wrong", in one error wrapping
// ErrInvalidRules.
//
// Each limit has a policy name for the RateLimit-Policy header
// (LimitSpec.Policy): the rule name for a rule with one limit, and
// "<rule>/<window>" for a rule with several, the window written as whole
// seconds ("60s") or else milliseconds ("500ms").
//
// # Matching
//
// A pattern is a glob: "*" matches any run of characters, including none and
// including ":" and "/"; "?" matches exactly one character (a Unicode code
// point); "\" makes the next character literal ("\*" is a star). The whole
// key must match.
//
// A request that names a rule (Request.Rule) is decided by that rule,
// whatever its pattern; naming a rule that does not exist is ErrUnknownRule.
// Otherwise the request is decided by the first rule, in file order, whose
// pattern matches the key; if none matches, by the default rule; if there is
// no default rule, by nothing: the request is allowed and not counted, and
// Decision.Rule is "". Put specific patterns before general ones.
//
// # Several limits, shadow mode
//
// All limits of a rule are checked in one counter call, atomically: a
// request is counted against every limit only when every limit has room, so
// a request denied by a per-second limit does not use up the per-minute one.
//
// A shadow rule counts and decides as usual, but its requests are always
// allowed: Decision.Allowed is true and Decision.WouldAllow says what the
// rule decided. Use it to try a new limit on live traffic. A shadow rule
// counts exactly what an enforcing rule would (only the requests it would
// allow), so WouldAllow is the decision enforcement would make, request by
// request.
//
// # Reload
//
// SetRules replaces the rules while Checks run. Counts live in the counter
// under (rule name, window, slices): a limit whose rule keeps its name, window
// and slice count keeps its clients' windows across a reload, even if its
// limit changes; renaming a rule or changing a window or slice count starts
// that limit from zero. A rule set that fails validation is rejected and the
// rules in force stay in force.
//
// # Worst cases
//
// Bounds lists every limit in force with counter.(*Counter).WorstCase of
// it: the most requests of one key the counter may accept in a window-long
// interval. Alone that is L + floor(Tolerance x L); in a cluster it grows
// with the number of nodes and with the sync interval against the window,
// and can exceed 1 + Tolerance for short windows or small limits. It reads
// the counter's current settings, so call it again after SetRules and after
// the node count changes.
//
// # Concurrency and zero value
//
// A Limiter is safe for concurrent use: any number of goroutines may call
// Check while others call SetRules. Each Check sees one rule set in full,
// the old or the new, never a mix. RuleSets are immutable once built or
// handed to a Limiter. The zero Limiter is not usable; create one with New.
// The zero Decision is ready to be Check's destination.
package limiter
