package limiter

import (
	"errors"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// Sentinel errors; httpapi maps them to status codes with errors.Is.
var (
	// ErrInvalidRules wraps every rule-file parse or validation error.
	ErrInvalidRules = errors.New("limiter: invalid rules")
	// ErrUnknownRule is returned by Check when Request.Rule names no rule.
	ErrUnknownRule = errors.New("limiter: unknown rule")
	// ErrInvalidKey is returned by Check for an empty key, a key over
	// MaxKeyBytes or a key that is not valid UTF-8.
	ErrInvalidKey = errors.New("limiter: invalid key")
	// ErrInvalidHits is returned by Check when hits < 1 or hits exceed a limit
	// of the rule; it also matches counter.ErrInvalidHits.
	ErrInvalidHits = errors.New("limiter: invalid hits")
	// ErrInvalidLimit is returned by Check for a bad limit override
	// (Request.Limit): a limit, window or slice count out of range, a rule
	// named beside it, or one (window, slices) pair more than
	// MaxOverrideWindows.
	ErrInvalidLimit = errors.New("limiter: invalid limit")
)

// OverrideRule is the Decision.Rule and policy name of a check decided by a
// limit override (Request.Limit), and the name its counts live under in
// the counter. It is reserved: no rule may be called so, or a rule's counts
// could mix with the overrides'.
const OverrideRule = "override"

// MaxOverrideWindows bounds the distinct (window, slices) pairs that limit
// overrides may use over a counter's life. Each pair is one registration in
// the counter, which never forgets one, so without a bound a stream of
// requests with ever new windows would grow the counter's limit registry
// without end. New declares the counter's family OverrideRule with this
// bound (counter.Family), which holds it whoever brings a pair: a check
// here, or a peer's counts or ask of one. Envoy's units give 6 pairs.
const MaxOverrideWindows = 64

// MaxKeyBytes is the longest key Check accepts.
const MaxKeyBytes = 1024

// RuleSet is a parsed and validated rule file. It is immutable once built.
type RuleSet struct {
	// Source names where the rules came from (a file path), for messages.
	Source string
	// Rules in file order.
	Rules []Rule
	// Envoy holds the envoyproxy/ratelimit configs the rules came from, one
	// per domain (Parse of an Envoy file, Merge), for the frontend that
	// matches descriptors; their counted limits are ByName rules in Rules.
	Envoy []*envoyrules.Config

	// files says, for a set built by Merge, how many rules and Envoy
	// configs came from each file, in order, so that messages name the
	// file of each; empty when everything came from Source.
	files []fileSpan
}

// fileSpan is one merged file's share of a RuleSet.
type fileSpan struct {
	source       string
	rules, envoy int
}

// Rule is one named rule: the limits it enforces and the keys it governs.
type Rule struct {
	Name string
	// Match is a key pattern ("*" matches any run of characters, "?" any one
	// character, "\" escapes the next one); empty for the default rule.
	Match string
	// Limits all apply: a request is allowed only if every one has room.
	Limits []LimitSpec
	// Shadow rules decide and count but always allow.
	Shadow bool
	// ByName rules decide only requests that name them (Request.Rule); they
	// are never matched by key, and one without Match is not a default
	// rule. Envoy descriptors are such rules: the frontend matches a request
	// descriptor to its node and names the node's rule (EnvoyRuleName), so a
	// key pattern would only let other requests into its counts.
	ByName bool
	// Line is the rule's line in Source (1-based), for messages.
	Line int
}

// LimitSpec is one "Limit requests per Window in Slices slices" limit of a rule.
type LimitSpec struct {
	// Policy is the name this limit has in the RateLimit-Policy header: the
	// rule name for a rule with one limit, "<rule>/<window>" otherwise
	// (window as "60s" or "500ms").
	Policy string
	Limit  int64
	Window time.Duration
	Slices int
}

// Request is one check.
type Request struct {
	Key string
	// Rule selects a rule by name; empty selects by matching Key.
	Rule string
	// Hits is how many requests this check counts as (>= 1; 0 is valid with
	// Peek).
	Hits int64
	// Peek decides without counting anything: Decision.Allowed (and
	// WouldAllow for shadow rules) says whether Hits would fit now; Hits may
	// be 0 with Peek (a check only: Envoy's hits_addend 0). A peek records
	// nothing, not even a denial, and never returns a Decision needing
	// coordination (Decision.Coordinate): it decides on what this node
	// knows, so PrepareAsk and Complete are not used with it.
	Peek bool
	// Limit, when set, decides Key against this one limit instead of a
	// rule's (Envoy's per-descriptor limit override); Rule must then be
	// empty. The decision's Rule, and the limit's policy name, is
	// OverrideRule ("override"), and counts live under ("override", window,
	// slices): overrides with the same window and slices share a key's
	// counts whatever their limits. Limit.Limit is 1..counter.MaxLimit and
	// the window as in rule files; Slices 0 means the rule-file default;
	// Policy is ignored. Errors wrap ErrInvalidLimit. In a coordinated
	// cluster an override is left to the key's coordinator where a rule's
	// check would be (Decision.Coordinate), and the ask carries its limit
	// (counter.Ask.Max) for the coordinator to decide with.
	Limit *LimitSpec
}

// Decider says who decided a check (Decision.Decided).
type Decider uint8

const (
	// DecidedHere: this node, on what it knows (every single-node check).
	DecidedHere Decider = iota
	// DecidedByCoordinator: the key's coordinator, this node or another.
	DecidedByCoordinator
	// DecidedInFallback: this node alone, with the per-node budget, because
	// the coordinator did not answer in time (or, for a limit override,
	// does not decode asks that state a limit: a node of an older version).
	DecidedInFallback
	// DecidedOnLease: this node, past its blind share, on a lease the
	// key's coordinator lent it (counter.ClusterConfig.LeaseShare).
	DecidedOnLease
)

// Answer is what the key's coordinator said of a check that Check left to
// it (Decision.Coordinate), for Complete.
type Answer struct {
	// Answered is false when no answer came in time: Complete then decides
	// alone, with the budget.
	Answered bool
	// Allowed is the coordinator's decision.
	Allowed bool
	// Counted reports that this node is the key's coordinator and the hits
	// are counted already (counter.Coordinate of its own ask).
	Counted bool
	// Results are the coordinator's, parallel to the rule's limits.
	Results []counter.Result
}

// LimitResult is the state of one limit of the deciding rule after a check.
type LimitResult struct {
	Policy     string
	Limit      int64
	Window     time.Duration
	Allowed    bool          // this limit had room
	Remaining  int64         // left in the window after this check, >= 0
	RetryAfter time.Duration // 0 when this limit had room
	Reset      time.Duration // until the full limit is available again
}

// Decision is the outcome of a check. The zero value is ready for use as
// Check's destination; Check overwrites every field.
type Decision struct {
	// Allowed is what the caller should do: true when every limit had room,
	// when the rule is in shadow mode, when no rule governs the key, or when
	// the key could not be tracked (counter at its cap).
	Allowed bool
	// WouldAllow is what the rule decided, before shadow mode: it differs
	// from Allowed only for a shadow rule that had no room.
	WouldAllow bool
	// Rule is the deciding rule's name, "" when no rule governs the key,
	// OverrideRule for a limit override (Request.Limit).
	Rule string
	// Shadow reports that the deciding rule is in shadow mode.
	Shadow bool
	// Untracked reports the key was allowed uncounted (counter at its cap).
	Untracked bool
	// Coordinate reports that the check is the key's coordinator's to
	// decide (counter.Decision.Coordinate): nothing was counted, Allowed is
	// false, and the caller completes the check with PrepareAsk and
	// Complete. Never set by Complete, nor for a peek (Request.Peek).
	Coordinate bool
	// Decided says who decided a check in a coordinated cluster: DecidedHere
	// (this node alone: far from the limit, or its view is full), or, for a
	// check that Check left to the coordinator, DecidedByCoordinator or
	// DecidedInFallback (no answer in time).
	Decided Decider
	// RetryAfter is 0 when WouldAllow, else the wait until the same request fits.
	RetryAfter time.Duration
	// N is how many entries of Limits are set.
	N int
	// Limits holds one entry per limit of the rule, in rule order.
	Limits [counter.MaxLimitsPerCall]LimitResult
}
