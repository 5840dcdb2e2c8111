package limiter

import (
	"errors"
	"time"

	"github.com/limiterd/limiterd/counter"
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
)

// MaxKeyBytes is the longest key Check accepts.
const MaxKeyBytes = 1024

// RuleSet is a parsed and validated rule file. It is immutable once built.
type RuleSet struct {
	// Source names where the rules came from (a file path), for messages.
	Source string
	// Rules in file order.
	Rules []Rule
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
	// Hits is how many requests this check counts as (>= 1).
	Hits int64
}

// Decider says who decided a check (Decision.Decided).
type Decider uint8

const (
	// DecidedHere: this node, on what it knows (every single-node check).
	DecidedHere Decider = iota
	// DecidedByCoordinator: the key's coordinator, this node or another.
	DecidedByCoordinator
	// DecidedInFallback: this node alone, with the per-node budget, because
	// the coordinator did not answer in time.
	DecidedInFallback
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
	// Rule is the deciding rule's name, "" when no rule governs the key.
	Rule string
	// Shadow reports that the deciding rule is in shadow mode.
	Shadow bool
	// Untracked reports the key was allowed uncounted (counter at its cap).
	Untracked bool
	// Coordinate reports that the check is the key's coordinator's to
	// decide (counter.Decision.Coordinate): nothing was counted, Allowed is
	// false, and the caller completes the check with PrepareAsk and
	// Complete. Never set by Complete.
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
