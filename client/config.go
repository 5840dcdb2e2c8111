package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every error from Config.Validate.
var ErrInvalidConfig = errors.New("client: invalid config")

// The defaults, with why they are what they are.
const (
	// DefaultTimeout is Config.Timeout's default. A check is added to the
	// latency of the request it guards, so the budget is small, but it must
	// stay well above what a healthy node needs so that a busy cluster is
	// not mistaken for a dead one (a failover after a timeout may count the
	// check twice): a node waits at most 5ms for a key's coordinator
	// (decision.DefaultDeadline), answers at p99 in about 5ms at the highest
	// rate it sustains and in under 20ms even on an overloaded shared
	// machine (BENCHMARKS.md). 50ms is two such slow attempts and a third
	// that is refused, and little next to the second-scale timeouts of the
	// requests being limited.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultAttemptTimeout is Config.AttemptTimeout's default: long enough
	// for a slow but healthy node, short enough that a node that does not
	// answer leaves most of DefaultTimeout to the next one.
	DefaultAttemptTimeout = 20 * time.Millisecond
	// DefaultBackoff is Config.Backoff's default: a dead node costs at most
	// one attempt a second, and a node that recovers gets traffic again
	// within a second.
	DefaultBackoff = time.Second
	// DefaultMaxIdleConnsPerHost is the keep-alive pool per node of the
	// default HTTP client. net/http's default of 2 makes every check beyond
	// two concurrent ones per node open (and later close) a connection,
	// which costs a handshake per check and piles up TIME_WAIT sockets; 64
	// covers the concurrency of a busy service instance.
	DefaultMaxIdleConnsPerHost = 64
)

// Bounds of the durations, against typing mistakes ("50s" for "50ms").
const (
	maxTimeout = 10 * time.Second
	maxBackoff = time.Hour
)

// Config configures a Client. A zero field takes its default, so a Config
// needs only Addrs, and the zero value of every other field is that of
// DefaultConfig().
type Config struct {
	// Addrs are the base URLs of the limiterd nodes ("http://10.0.0.1:8080",
	// "https://limiterd.internal/prefix") or bare host:port pairs, which
	// mean http. Any node may be asked about any key; a key is asked of the
	// same node while that node is healthy (chosen by a hash of the key, so
	// that keys spread over the nodes), and of the next one in Addrs order
	// when it is not. At least one; no duplicates.
	Addrs []string
	// Timeout bounds one Check, failovers included; a shorter deadline of
	// the caller's context wins. Default DefaultTimeout (50ms), at most 10s.
	Timeout time.Duration
	// AttemptTimeout bounds the wait for one node, so that a node that does
	// not answer leaves time for the next. Default DefaultAttemptTimeout
	// (20ms) or Timeout, whichever is less; at most Timeout.
	AttemptTimeout time.Duration
	// Backoff is how long a node that failed (connection error, timeout,
	// 5xx, an answer that is not limiterd's) is skipped. After it the next
	// Check to reach the node tries it again, alone: other Checks keep
	// skipping the node until that attempt is over. Default DefaultBackoff
	// (1s), at most 1h.
	Backoff time.Duration
	// FailClosed makes a Check that no node decided deny the request
	// (Decision.Allowed false) instead of allowing it. The default, false,
	// fails open: a rate limiter that is down must not take the service
	// down with it. It is "FailClosed" rather than "FailOpen" so that the
	// zero value is the safe one.
	FailClosed bool
	// HTTPClient sends the checks. nil means a client of its own with
	// keep-alive, DefaultMaxIdleConnsPerHost idle connections per node, no
	// proxy (a proxy from the environment would add a hop to every check)
	// and no timeout of its own (Timeout and AttemptTimeout bound each
	// call).
	HTTPClient *http.Client
	// Now is the clock of the back-off. Default time.Now; tests inject
	// their own. The timeouts run on real time, as net/http does.
	Now func() time.Time
}

// DefaultConfig returns the defaults documented on Config, with no Addrs.
func DefaultConfig() Config {
	return Config{
		Timeout:        DefaultTimeout,
		AttemptTimeout: DefaultAttemptTimeout,
		Backoff:        DefaultBackoff,
		Now:            time.Now,
	}
}

// Validate reports every invalid field, each error wrapping
// ErrInvalidConfig. Zero fields other than Addrs are valid: they take their
// defaults.
func (c Config) Validate() error {
	var errs []error
	if _, err := c.baseURLs(); err != nil {
		errs = append(errs, err)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if c.Timeout < 0 || c.Timeout > maxTimeout {
		errs = append(errs, fmt.Errorf("%w: Timeout must be between 0 (the default, %v) and %v, got %v", ErrInvalidConfig, DefaultTimeout, maxTimeout, c.Timeout))
	} else if c.AttemptTimeout < 0 || c.AttemptTimeout > timeout {
		// Against a valid Timeout only: a bad one is reported already.
		errs = append(errs, fmt.Errorf("%w: AttemptTimeout must be between 0 (the default) and Timeout (%v), got %v", ErrInvalidConfig, timeout, c.AttemptTimeout))
	}
	if c.Backoff < 0 || c.Backoff > maxBackoff {
		errs = append(errs, fmt.Errorf("%w: Backoff must be between 0 (the default, %v) and %v, got %v", ErrInvalidConfig, DefaultBackoff, maxBackoff, c.Backoff))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields of a valid Config.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Timeout == 0 {
		c.Timeout = d.Timeout
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = min(d.AttemptTimeout, c.Timeout)
	}
	if c.Backoff == 0 {
		c.Backoff = d.Backoff
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.HTTPClient == nil {
		c.HTTPClient = defaultHTTPClient()
	}
	return c
}

// baseURLs normalizes Addrs: a scheme added where there is none, no
// trailing slash.
func (c Config) baseURLs() ([]string, error) {
	if len(c.Addrs) == 0 {
		return nil, fmt.Errorf("%w: Addrs is empty; give at least one limiterd node", ErrInvalidConfig)
	}
	out := make([]string, 0, len(c.Addrs))
	seen := make(map[string]bool, len(c.Addrs))
	for _, a := range c.Addrs {
		base, err := baseURL(a)
		if err != nil {
			return nil, fmt.Errorf("%w: Addrs: %q: %w", ErrInvalidConfig, a, err)
		}
		if seen[base] {
			// The same node twice would be tried twice on failover.
			return nil, fmt.Errorf("%w: Addrs: %q is given twice", ErrInvalidConfig, base)
		}
		seen[base] = true
		out = append(out, base)
	}
	return out, nil
}

// baseURL normalizes one address.
func baseURL(a string) (string, error) {
	s := strings.TrimSpace(a)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("a node address has no query or fragment")
	case u.User != nil:
		// It would end up in error messages and logs.
		return "", errors.New("credentials in a node address are not supported")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// defaultHTTPClient is the client Config.HTTPClient documents.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true, // for https nodes; a custom dialer turns it off otherwise
		MaxIdleConnsPerHost: DefaultMaxIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: maxTimeout, // the call's context is the real bound
	}}
}
