package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrBadRequest is wrapped by the error of a Check that a node refused
	// as bad input (400: an empty, over-long or non-UTF-8 key, hits below 1
	// or above a limit of the rule, an unknown rule). The error's text ends
	// with the node's message. Such a Check never fails open: the request
	// would be refused by every node, so allowing it would let a client
	// escape its limit by sending garbage.
	ErrBadRequest = errors.New("client: bad request")
	// ErrUnavailable is wrapped by the error of a Check that no node
	// decided: every node failed or was backing off, the deadline passed,
	// the caller's context ended, or the nodes asked reported an internal
	// error (X-RateLimit-Error: internal). The error also wraps what each
	// node attempt failed with (context.DeadlineExceeded for a timeout).
	ErrUnavailable = errors.New("client: no decision available")
)

// Request is one check: count Hits requests of Key.
type Request struct {
	// Key identifies the client being limited (an address, an API key);
	// at most 1024 bytes of UTF-8.
	Key string
	// Rule names the rule to decide by; empty selects the rule whose
	// pattern matches Key.
	Rule string
	// Hits is how many requests the check counts as; 0 means 1.
	Hits int
}

// Decision is a node's answer to a check, or the fallback when no node
// answered (see Client.Check).
type Decision struct {
	// Allowed is what the caller should do with the request.
	Allowed bool
	// Limit and Remaining are those of the most constrained limit of the
	// deciding rule (the one with the least remaining, or on a deny the one
	// with the longest wait); 0 when no rule governs the key.
	Limit, Remaining int64
	// RetryAfter is the wait until the same request fits, when the rule
	// said no (for a shadow rule: would have said no); else 0. Whole
	// milliseconds, rounded up.
	RetryAfter time.Duration
	// Reset is the time until the most constrained limit is fully
	// available again. Whole milliseconds, rounded up.
	Reset time.Duration
	// Rule is the deciding rule, "" when none governs the key.
	Rule string
	// Shadow reports a dry-run rule: Allowed is then always true and
	// WouldAllow says what the rule decided. For any other rule WouldAllow
	// equals Allowed.
	Shadow, WouldAllow bool
	// Untracked reports a key allowed uncounted: the node tracks as many
	// keys as it may.
	Untracked bool
	// FailedOpen reports that the answer did not come from a node (every
	// node dead, slow or backing off, or an internal error on the node):
	// the request is allowed anyway, and the error returned with the
	// Decision says why.
	FailedOpen bool
	// Headers holds the RateLimit-Policy and RateLimit fields of the
	// answer (draft-ietf-httpapi-ratelimit-headers), under their canonical
	// keys "Ratelimit-Policy" and "Ratelimit", for a service to pass on to
	// its own client; nil when there are none (no rule, a shadow rule, no
	// answer). It is the caller's: nothing else holds it.
	Headers http.Header
}

// Client asks limiterd nodes over HTTP whether requests may proceed. Build
// it with New.
type Client struct {
	cfg   Config
	nodes []node
}

// node is one limiterd node and its back-off state.
type node struct {
	base  string // "http://10.0.0.1:8080", for messages
	check string // base + "/check?key="
	// until is the end of the node's back-off, in Unix nanoseconds of
	// Config.Now; 0 while the node is healthy. Read on every check, written
	// only when it changes, so healthy nodes cost no shared write.
	until atomic.Int64
}

// New validates cfg and builds a Client. It does no I/O: a node that is
// down is found out, and skipped, by the first Check that asks it.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bases, err := cfg.baseURLs()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg.withDefaults(), nodes: make([]node, len(bases))}
	for i, b := range bases {
		c.nodes[i].base = b
		c.nodes[i].check = b + "/check?key="
	}
	return c, nil
}

// Check asks a node about req and returns its decision. The error says how
// to read the Decision:
//
//   - nil: a node decided; Decision is its answer, allowed (200) or denied
//     (429).
//   - wrapping ErrBadRequest: a node refused req as bad input. The Decision
//     is the zero Decision, which denies: bad input never fails open.
//   - wrapping ErrUnavailable: no node decided within Config.Timeout (or
//     ctx's deadline, if earlier). The Decision is the fallback: allowed,
//     with FailedOpen set, or with Config.FailClosed the zero Decision.
//     The error says what each node attempt failed with; log it.
//
// Nodes are tried in turn, starting from the one that key hashes to,
// skipping the ones backing off: a connection error, a timeout of
// Config.AttemptTimeout, a 5xx or an answer that is not limiterd's sends
// the call on to the next node and starts the failed node's back-off. A
// node that reports an internal error is not backed off (the cause may be
// the key) but the next node is tried. A failover after a timeout may count
// the check twice, once on the slow node if it did count it: limiterd's
// limits are approximate by design, and an extra count errs on the side of
// the limit.
func (c *Client) Check(ctx context.Context, req Request) (Decision, error) {
	start := time.Now()
	deadline := start.Add(c.cfg.Timeout)
	query := req.query()
	var errs []error
	n := len(c.nodes)
	first := c.first(req.Key)
	for i := range n {
		nd := &c.nodes[(first+i)%n]
		prev, ok := nd.claim(c.cfg.Now(), c.cfg.Backoff)
		if !ok {
			continue
		}
		// The first attempt starts when the call does, so that it has its
		// whole AttemptTimeout even when that is the whole Timeout.
		at := start
		if len(errs) > 0 {
			at = time.Now()
		}
		d, res, err := c.attempt(ctx, nd, query, at, deadline)
		switch res {
		case decided:
			nd.healthy()
			return d, nil
		case refused:
			nd.healthy()
			return Decision{}, err
		case undecided:
			nd.healthy()
		case failed:
			nd.backOff(c.cfg.Now(), c.cfg.Backoff)
		case abandoned:
			// Not the node's fault: a probe gives its turn back.
			nd.unclaim(prev)
		}
		errs = append(errs, err)
		if res == abandoned || !time.Now().Before(deadline) {
			break
		}
	}
	return c.fallback(errs)
}

// fallback is the answer of a Check that no node decided.
func (c *Client) fallback(errs []error) (Decision, error) {
	err := &unavailableError{errs: errs}
	if c.cfg.FailClosed {
		return Decision{}, err
	}
	return Decision{Allowed: true, WouldAllow: true, FailedOpen: true}, err
}

// unavailableError is the ErrUnavailable of one Check, with what each
// attempt failed with.
type unavailableError struct{ errs []error }

func (e *unavailableError) Error() string {
	if len(e.errs) == 0 {
		return ErrUnavailable.Error() + ": every node is backing off after a failure"
	}
	var b strings.Builder
	b.WriteString(ErrUnavailable.Error())
	for i, err := range e.errs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *unavailableError) Unwrap() []error { return append([]error{ErrUnavailable}, e.errs...) }

// query returns what follows "?key=" in the /check URL of r. The key is
// always sent, even empty, so that the node never takes it from a header
// of this request.
func (r Request) query() string {
	q := url.QueryEscape(r.Key)
	if r.Rule != "" {
		q += "&rule=" + url.QueryEscape(r.Rule)
	}
	if r.Hits != 0 {
		q += "&hits=" + strconv.Itoa(r.Hits)
	}
	return q
}

// first returns the node a key is asked of first: a hash of the key (FNV-1a)
// spreads keys over the nodes, and keeps each key on one node while it is
// healthy.
func (c *Client) first(key string) int {
	if len(c.nodes) == 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(len(c.nodes)))
}

// claim reports whether a Check may ask the node now, and returns the
// back-off state it found. A node whose back-off is over is claimed by one
// Check, which moves the end of the back-off on so that concurrent Checks
// keep skipping the node until that probe is over: a node that is still
// down costs one attempt per back-off period, not one per Check.
func (n *node) claim(now time.Time, backoff time.Duration) (prev int64, ok bool) {
	until := n.until.Load()
	if until == 0 {
		return 0, true
	}
	t := now.UnixNano()
	if t < until {
		return until, false
	}
	return until, n.until.CompareAndSwap(until, t+int64(backoff))
}

// unclaim gives back a probe that ended without a verdict on the node.
func (n *node) unclaim(prev int64) {
	if prev != 0 {
		n.until.Store(prev)
	}
}

// healthy ends the node's back-off, if it has one.
func (n *node) healthy() {
	if n.until.Load() != 0 {
		n.until.Store(0)
	}
}

// backOff starts (or restarts) the node's back-off.
func (n *node) backOff(now time.Time, backoff time.Duration) {
	n.until.Store(max(now.UnixNano()+int64(backoff), 1))
}
