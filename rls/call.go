package rls

import (
	"fmt"
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// kind is how a descriptor is answered.
type kind uint8

const (
	kindNone      kind = iota // no limit applies: OK, no current_limit
	kindUnlimited             // unlimited: OK, limit_remaining MaxUint32
	kindDenyAll               // requests_per_unit 0: OVER_LIMIT, nothing counted
	kindCounted               // decided by the decision layer: reqs[req]
)

// descPlan is what plan found out about one descriptor.
type descPlan struct {
	kind    kind
	unit    rlsv3.RateLimitResponse_RateLimit_Unit
	limit   uint32
	name    string // current_limit's name: the rate_limit's name, if any
	policy  string // the RateLimit-Policy member's name (kindDenyAll)
	window  time.Duration
	shadow  bool
	tooMany bool // hits above the limit: can never fit
	req     int  // index in call.reqs (kindCounted)
}

// call holds the buffers of one ShouldRateLimit, pooled.
type call struct {
	descs   []descPlan
	nodes   []*envoyrules.Descriptor // the governing node of each descriptor, or nil
	hits    []int64
	keys    []string
	reqs    []limiter.Request
	reqIdx  []int // the descriptor of each request
	res     []decision.Result
	entries []envoyrules.Entry
	replace map[string]bool
}

// results returns n Results for DecideAll.
func (c *call) results(n int) []decision.Result {
	if cap(c.res) < n {
		c.res = make([]decision.Result, n)
	}
	c.res = c.res[:n]
	return c.res
}

// plan validates req and works out, for each descriptor, how it is
// answered, filling c.reqs with what the decision layer must decide. It
// returns the message for a call refused as invalid, or "".
func (c *call) plan(req *rlsv3.RateLimitRequest, rules Rules) string {
	n := len(req.GetDescriptors())
	switch {
	case req.GetDomain() == "":
		return "rate limit domain must not be empty"
	case n == 0:
		return "rate limit descriptor list must not be empty"
	case n > maxDescriptors:
		return fmt.Sprintf("%d descriptors: at most %d in one call", n, maxDescriptors)
	}
	domain := req.GetDomain()
	cfg := rules.Envoy(domain)
	c.descs, c.nodes, c.hits, c.keys = resize(c.descs, n), resize(c.nodes, n), resize(c.hits, n), resize(c.keys, n)
	c.reqs, c.reqIdx = c.reqs[:0], c.reqIdx[:0]
	clear(c.replace)
	for i, d := range req.GetDescriptors() {
		c.descs[i], c.nodes[i] = descPlan{}, nil
		entries := d.GetEntries()
		switch {
		case len(entries) == 0:
			return fmt.Sprintf("descriptor %d has no entries", i)
		case len(entries) > maxEntries:
			return fmt.Sprintf("descriptor %d has %d entries: at most %d", i, len(entries), maxEntries)
		case d.GetIsNegativeHits():
			return fmt.Sprintf("descriptor %d: is_negative_hits (returning hits) is not supported by limiterd", i)
		}
		c.entries = c.entries[:0]
		for j, e := range entries {
			if e.GetKey() == "" {
				return fmt.Sprintf("descriptor %d: entry %d has no key", i, j)
			}
			c.entries = append(c.entries, envoyrules.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		var own *uint64
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			own = &v
		}
		c.hits[i] = hitsOf(req.GetHitsAddend(), own)
		if cfg == nil {
			continue // a domain with no configuration: nothing applies, as upstream
		}
		c.keys[i] = envoyrules.CountKey(domain, c.entries)
		if n := len(c.keys[i]); n > limiter.MaxKeyBytes {
			return fmt.Sprintf("descriptor %d: its domain and entries make a key of %d bytes, at most %d", i, n, limiter.MaxKeyBytes)
		}
		if o := d.GetLimit(); o != nil {
			p, msg := overridePlan(i, o.GetRequestsPerUnit(), o.GetUnit().String(), o.GetUnitMultiplier().GetValue())
			if msg != "" {
				return msg
			}
			c.descs[i] = p
			continue
		}
		node := cfg.Match(c.entries)
		if node == nil || node.Limit == nil {
			continue
		}
		c.nodes[i] = node
		for _, name := range node.Replaces {
			if c.replace == nil {
				c.replace = make(map[string]bool)
			}
			c.replace[name] = true
		}
		l := node.Limit
		p := descPlan{name: l.Name, shadow: node.ShadowMode, window: l.Window, limit: l.RequestsPerUnit,
			unit: rlsv3.RateLimitResponse_RateLimit_Unit(rlsv3.RateLimitResponse_RateLimit_Unit_value[l.Unit])}
		switch {
		case l.Unlimited:
			p.kind = kindUnlimited
		case l.DeniesAll():
			p.kind, p.policy = kindDenyAll, limiter.EnvoyRuleName(domain, node)
		default:
			p.kind, p.policy = kindCounted, limiter.EnvoyRuleName(domain, node)
		}
		c.descs[i] = p
	}
	// Replaces: a matched limit named in any matched node's replaces is
	// dropped for this call (envoyproxy/ratelimit's constructLimitsToCheck).
	anyTooMany := false
	for i := range c.descs {
		p := &c.descs[i]
		if node := c.nodes[i]; node != nil && node.Limit.Name != "" && c.replace[node.Limit.Name] {
			*p = descPlan{}
			continue
		}
		if p.kind != kindCounted {
			continue
		}
		hits := c.hits[i]
		if hits > int64(p.limit) {
			// Can never fit: over the limit, and the call counts nothing.
			p.tooMany, anyTooMany = true, true
			hits = 0
		}
		var override *limiter.LimitSpec
		rule := p.policy
		if c.nodes[i] == nil {
			override, rule = &limiter.LimitSpec{Limit: int64(p.limit), Window: p.window}, ""
		}
		p.req = len(c.reqs)
		c.reqs = append(c.reqs, limiterRequest(c.keys[i], rule, hits, override))
		c.reqIdx = append(c.reqIdx, i)
	}
	if anyTooMany {
		for i := range c.reqs {
			c.reqs[i].Peek = true
		}
	}
	return ""
}

// overridePlan plans a descriptor that carries its own limit.
func overridePlan(i int, perUnit uint32, unit string, multiplier uint32) (descPlan, string) {
	w := unitWindow(unit)
	if w == 0 {
		return descPlan{}, fmt.Sprintf("descriptor %d: limit override: unit %s is not one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH", i, unit)
	}
	if multiplier > 1 {
		if w > 720*time.Hour/time.Duration(multiplier) {
			return descPlan{}, fmt.Sprintf("descriptor %d: limit override: %d × %s is longer than 720h, the longest window limiterd counts", i, multiplier, unit)
		}
		w *= time.Duration(multiplier)
	}
	if perUnit > math.MaxInt32 {
		return descPlan{}, fmt.Sprintf("descriptor %d: limit override: requests_per_unit %d is above 2147483647", i, perUnit)
	}
	p := descPlan{kind: kindCounted, limit: perUnit, window: w, policy: "override",
		unit: rlsv3.RateLimitResponse_RateLimit_Unit(rlsv3.RateLimitResponse_RateLimit_Unit_value[unit])}
	if perUnit == 0 {
		p.kind = kindDenyAll
	}
	return p, ""
}

// unitWindow returns the window of one of Envoy's units (upstream's
// UnitToDivider), or 0: UNKNOWN, and a year, which is longer than
// limiterd's longest window.
func unitWindow(unit string) time.Duration {
	switch unit {
	case "SECOND":
		return time.Second
	case "MINUTE":
		return time.Minute
	case "HOUR":
		return time.Hour
	case "DAY":
		return 24 * time.Hour
	case "WEEK":
		return 7 * 24 * time.Hour
	case "MONTH":
		return 30 * 24 * time.Hour
	}
	return 0
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
