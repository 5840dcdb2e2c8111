// Package envoyrules reads the configuration files of envoyproxy/ratelimit
// (Lyft's global rate limit service for Envoy) so that limiterd can serve an
// existing file as it is: it parses and validates one file into a Config and
// finds, for a request descriptor, the descriptor node whose limit governs
// it, with upstream's semantics. Answering the gRPC RateLimitService is the
// caller's job; the notes below say what it needs.
//
// The package is pure: no clock, no goroutines, no I/O except Load reading
// a file. A *Config is immutable once Parse (or Load) returns it and safe
// for concurrent use by any number of goroutines; callers must not modify
// it. The zero Config is valid and matches nothing.
//
// Semantics follow envoyproxy/ratelimit at commit f2fb157 (July 2026):
// src/config/config_impl.go (loading, validateYamlKeys, GetLimit),
// src/utils/utilities.go (UnitToDivider), src/limiter/cache_key.go (cache
// keys), src/service/ratelimit.go (replaces, unlimited, shadow mode) and the
// README's "Configuration" section.
//
// # File format
//
//	domain: messaging            # required, not empty
//	descriptors:                 # optional list
//	  - key: message_type        # required, not empty
//	    value: marketing         # optional; "*" in it is a wildcard
//	    rate_limit:              # optional
//	      unit: day              # second, minute, hour, day, week, month (any case)
//	      requests_per_unit: 5   # required, 0..2147483647; 0: deny every request
//	      unlimited: false       # true: no unit, no requests_per_unit
//	      name: marketing        # optional, for replaces
//	      replaces:              # optional
//	        - name: other_limit
//	    shadow_mode: false       # optional
//	    detailed_metric: false   # optional, accepted and ignored (metrics only)
//	    value_to_metric: false   # optional, accepted and ignored (metrics only)
//	    metadata: {}             # optional mapping, accepted and ignored
//	    quota_mode: false        # true is refused: not supported by limiterd
//	    share_threshold: false   # true is refused: not supported by limiterd
//	    descriptors: [...]       # optional nested list
//
// "requests_per_unit: 0" is upstream's way to block a descriptor outright
// (README Example 3 blocks the address 50.0.0.5 so; upstream's
// examples/ratelimit/config/example.yaml has a "banned" limit of 0): every
// request it governs is over the limit. Parse accepts it, with a valid unit
// as for any limit, and RateLimit.DeniesAll reports it; see "What Match
// returns". A missing requests_per_unit is refused, although upstream's
// yaml.v2 struct (YamlRateLimit, a uint32) reads it as 0 and so denies
// every request: a forgotten line should not block all traffic. Write
// "requests_per_unit: 0" if that is what is meant.
//
// Scalars are read as upstream's yaml.v2 reads them: "value: 200" is the
// text "200", booleans may be written yes/no/on/off, a null field is an
// absent one ("rate_limit:" with nothing after it is no rate limit), and
// anchors, aliases and "<<" merge keys are followed. (Upstream refuses a
// float anywhere, "value: 1.5"; limiterd takes it as the text "1.5".)
//
// Parse reports every problem at once, each as
// `file:line: descriptor "messaging.message_type_marketing": field
// "rate_limit.unit": what is wrong`, in one error wrapping ErrInvalidConfig.
// It refuses what upstream refuses: YAML that is not a mapping, an unknown
// field, a non-text field name, a list item that is not a mapping, an empty
// or missing domain or key, two sibling descriptors with the same composite
// key (Key, or Key + "_" + Value: so key "a_b" collides with key "a" value
// "b", as upstream), an invalid unit, a unit given with "unlimited: true", an
// empty replaces name, a limit replacing its own name. It also refuses,
// where upstream does not:
//
//   - a field upstream knows in the wrong place ("unit" beside "key"):
//     upstream's key check is one flat list, so it silently ignores such a
//     field, which then never does what its author meant;
//   - a repeated field in one mapping, and a second YAML document (upstream
//     reads only the first);
//   - requests_per_unit missing: upstream reads it as 0, which denies every
//     request (see above); write 0 explicitly if that is meant;
//   - requests_per_unit above 2147483647 (upstream takes any uint32):
//     limiterd's counter counts limits of at most 2147483647;
//   - requests_per_unit, or an invalid unit, together with "unlimited:
//     true" (upstream ignores both);
//   - unit "year" (365 days): limiterd's counter keeps windows of at most
//     720h (counter.MaxWindow); "month" (30 days) is the longest unit;
//   - quota_mode: true and share_threshold: true, which change how upstream
//     decides and counts, and which limiterd does not implement;
//   - descriptors nested more than 64 levels deep, a descriptor that
//     contains itself through an alias, and aliases that expand to more
//     nodes than the file has bytes plus 10000 (limits against hostile files).
//
// Parse reads one file. Upstream loads a directory of them and refuses two
// files with the same domain unless MERGE_DOMAIN_CONFIG merges them; that
// check, and merging, are the caller's.
//
// # Matching
//
// A request names a domain and one or more descriptors, each a list of
// entries (Entry). For each descriptor the caller checks the domain against
// Config.Domain (an unknown domain has no limits) and calls Match, which
// walks the tree entry by entry as upstream's GetLimit does: at each level
// the node with composite key entry.Key + "_" + entry.Value, else the first
// wildcard node (file order) whose composite key matches that string, each
// "*" matching any run of characters including none, else the node whose
// composite key is entry.Key (a node without value, matching any value).
// The number of entries must equal the depth of the node reached: a limit
// on ("key", "value") does not govern [("key", "value"), ("sub", "x")].
//
// As upstream, the key takes part in the comparison: a wildcard pattern or
// node key is compared with the joined string key + "_" + value, so the
// value "bar*" of key "foo" also matches the entry ("foo_bar", "x"), and a
// node with key "a" and value "b" is also found for an entry with key "a_b"
// when nothing more specific matches. Configs rarely notice this; it is kept
// so that every request matches here what it matches upstream.
//
// What Match returns, and how the caller answers as upstream does:
//
//   - nil: no node, a node without rate_limit (upstream "whitelists" it),
//     or a depth mismatch. The descriptor is not limited: status OK, nothing
//     counted. A limit on a node above the one reached does not apply.
//   - a node with Limit.Unlimited: status OK with limit_remaining
//     4294967295 (MaxUint32), nothing counted; its Replaces still apply.
//   - a node whose Limit.DeniesAll (requests_per_unit 0): status
//     OVER_LIMIT with current_limit {requests_per_unit: 0, unit: Unit} and
//     limit_remaining 0, nothing counted. Upstream gives the same code,
//     current_limit and limit_remaining: it adds the hits to the node's
//     counter (src/redis/fixed_cache_impl.go, DoLimit) and finds the total
//     above 0 (src/limiter/base_limiter.go, GetResponseDescriptorStatus,
//     lines 99-107). It answers
//     duration_until_reset from utils.CalculateReset (base_limiter.go line
//     208, src/utils/utilities.go lines 41-45): the time to the end of the
//     current fixed window, unit - now % unit seconds. limiterd answers the
//     unit's whole length, Window: nothing is counted, so no window is under
//     way. (Upstream answers OK, limit_remaining 0, for a descriptor with
//     hits_addend 0 while nothing has been counted in its window; limiterd's
//     answer does not depend on hits.) Shadow mode and Replaces apply as to
//     any limit: a shadow node answers OK, and a replaced one is dropped.
//   - a node with a counted Limit: count under the node's RuleName and
//     CountKey(domain, entries), at most RequestsPerUnit per Window.
//     Upstream counts in fixed windows aligned to the Unix epoch
//     (now / unit * unit), which lets a client send up to twice the limit
//     across a window boundary; limiterd counts in sliding windows of the
//     same length, which do not, so answers differ near boundaries.
//   - ShadowMode on that node: count and report as usual, but the
//     descriptor's status is always OK (upstream's base_limiter).
//   - a node with both a Limit and children: its Limit governs requests of
//     its own depth only; deeper requests are governed by its children.
//
// Replaces (README "Replaces"; service.constructLimitsToCheck): after every
// descriptor of a request is matched, the names in the Replaces of every
// matched node (unlimited ones included) form one set, and every matched
// node whose Limit.Name is in that set is dropped for this request: not
// counted, status OK. A node is never dropped by its own Replaces (Parse
// refuses that). A request's overall code is OVER_LIMIT when any remaining
// descriptor is over its limit.
//
// A request descriptor that carries its own limit override is answered by
// upstream from the override alone, without Match, once the domain is known.
//
// # Names and keys
//
// Descriptor.RuleName gives each node a limiterd rule name, unique within
// the Config, also nodes whose limit is Unlimited or DeniesAll, which are
// never counted. CountKey gives the counter key for a request descriptor: the
// domain and every entry's key and value, escaped so that distinct requests
// never share a key (upstream's cache key joins them with "_", ambiguously).
package envoyrules
