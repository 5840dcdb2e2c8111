// Package limiter applies a rule set to requests: it finds the rule that
// governs a client key, checks the key against every limit of that rule in a
// counter.Counter, and reports the decision with what the caller needs for
// its response headers (remaining, retry-after, reset, per-limit policy).
//
// Like package counter it is a pure core: it never reads the clock (Check
// takes the time; CheckNow is the one convenience that does), starts no
// goroutines and does no I/O except Load and ReadFiles reading
// rule files.
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
// A ByName rule (Rule.ByName) decides only requests that name it: it is
// never matched by key, and one without a pattern is not the default rule,
// so a set may hold any number of them. Rules made from Envoy files are
// ByName rules (below): Envoy's descriptors are matched by the frontend,
// which names the rule, not by a key pattern. The rule file has no field
// for it; a RuleSet built in code may set it.
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
// # Peek: check without counting
//
// A request with Peek set (Envoy's hits_addend 0, or a probe) is decided
// without counting anything: Decision.Allowed, and WouldAllow for a shadow
// rule, say whether Hits more would fit every limit now (count + hits <=
// limit), and the limits report what remains without them. Hits may be 0
// (is the key over its limit already?) up to the rule's smallest limit. A
// peek records nothing: no slice, no state for a key not yet tracked, no
// denial to remember (counter.Peek). In a cluster it decides on the window
// as this node knows it, its own and its peers' merged slices, and never
// returns a Decision needing coordination: PrepareAsk and Complete are not
// used with it, and refuse it.
//
// # Limit overrides
//
// A request with Limit set is decided against that one limit instead of a
// rule's: Envoy lets each request descriptor carry its own limit. Rule must
// be empty; the decision's Rule and policy name are "override"
// (OverrideRule), a name rule files may not use. The limit is checked as a
// rule file's is (limit 1..2147483647, window in whole milliseconds up to
// 720h, slices 1..3600 and at least 1ms each, 0 for the default); a bad one
// is ErrInvalidLimit. Counts live in the counter under ("override", window,
// slices), so two overrides with the same window and slices count a key
// together, whatever their limits, just as a rule whose limit changes
// keeps its counts. Each (window, slices) pair is one registration of the
// counter's family "override", which New declares with MaxOverrideWindows
// (64) pairs (counter.Family): the counter keeps every registration, and
// requests must not be able to grow that registry without end. Envoy's six
// units give six pairs; a 65th pair is ErrInvalidLimit. A node registers
// a pair on first use, or on first sight of a peer's counts or ask of it,
// so every node keeps every node's counts of every pair, and the bound
// counts the pairs of both.
//
// In a coordinated cluster an override is decided like a rule's check:
// where that would be left to the key's coordinator, Check returns
// Decision.Coordinate, PrepareAsk puts the override's limit in the ask
// (counter.Ask.Max: no registration holds it), the coordinator decides
// with it, and Complete counts the grant or remembers the denial (for
// checks of that limit or a smaller one). Both halves of the promise hold
// for overrides as for rules; when callers state different limits for one
// key and pair, each check is decided by its own limit on the shared
// count, and a window holds at most the bound of the largest limit stated
// in it (package counter, "Limits stated per call"). Overrides do not
// appear in Bounds.
//
// # Envoy files
//
// Parse and Load also read an envoyproxy/ratelimit configuration file as
// it is (package envoyrules; told apart by its top-level "domain"). Its
// Config is kept in RuleSet.Envoy, where the frontend finds it
// (Limiter.Envoy) to match request descriptors, and every descriptor node
// with a counted limit becomes a ByName rule named EnvoyRuleName(domain,
// node), "envoy:<domain>:<node's RuleName>", with one limit of
// requests_per_unit per unit, the default slices for that window, the
// node's shadow_mode and its line. The frontend names that rule and counts
// under envoyrules.CountKey. Not converted, and never counted, are: nodes
// without a rate_limit, "unlimited: true" nodes, and nodes with
// "requests_per_unit: 0", which deny every request; the frontend answers
// those from the Config alone (envoyrules' doc says how upstream answers).
// An Envoy file with only such nodes is a valid rule set with no rules.
// Errors of an Envoy file match both ErrInvalidRules and
// envoyrules.ErrInvalidConfig.
//
// # Several files
//
// Merge combines the rule sets of several files, rule files and Envoy
// files alike, into one: rules in order of the files and within each, so
// an earlier file's patterns are tried first, and Envoy configs likewise.
// The result is validated as a whole: a rule name used twice, a second
// default rule, a pattern repeating an earlier file's, or two Envoy files
// with the same domain (upstream refuses that too) are errors that name
// the file and line of both sides.
//
// # Reload
//
// SetRules replaces the rules while Checks run. Counts live in the counter
// under (rule name, window, slices): a limit whose rule keeps its name, window
// and slice count keeps its clients' windows across a reload, even if its
// limit changes; renaming a rule or changing a window or slice count starts
// that limit from zero. A rule set that fails validation is rejected and the
// rules in force stay in force. The Envoy configs of the set are swapped
// with its rules, in one step.
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
