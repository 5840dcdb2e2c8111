package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/limiterd/limiterd/decision"
)

// ErrInvalidConfig is wrapped by every error from Config.Validate and by New
// for a missing dependency.
var ErrInvalidConfig = errors.New("httpapi: invalid config")

// maxBodyLimit bounds Config.MaxBodyBytes: a check request is a few hundred
// bytes, so a larger setting is a mistake that would only let a client make
// the node buffer more.
const maxBodyLimit = 1 << 20

// Config configures an API. A zero field takes its default, so the zero
// value of Config is the same as DefaultConfig().
type Config struct {
	// KeyHeader names the header the key is taken from when a check has no
	// key parameter. For X-Forwarded-For the first address of the first
	// header line is used; for any other header its whole first value.
	// Surrounding spaces and tabs are trimmed. Default "X-Forwarded-For".
	KeyHeader string
	// Ready reports whether the node should receive traffic; /readyz
	// answers 503 with its error text while it returns an error. nil means
	// always ready.
	Ready func() error
	// Cluster, when set, returns the node's view of its cluster, which GET
	// /cluster serves as JSON (encoding/json); nil means the node runs alone
	// and /cluster answers 404. limiterd passes (*cluster.Node).Status.
	Cluster func() any
	// MaxBodyBytes caps a POST /check body; a larger one is answered 413.
	// The default, 4096, holds any key of limiter.MaxKeyBytes written as
	// plain UTF-8. At most 1 MiB.
	MaxBodyBytes int64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{KeyHeader: "X-Forwarded-For", MaxBodyBytes: 4096}
}

// Validate reports every invalid field, each error wrapping
// ErrInvalidConfig. Zero fields are valid: they take their defaults.
func (c Config) Validate() error {
	var errs []error
	if c.KeyHeader != "" && !validHeaderName(c.KeyHeader) {
		errs = append(errs, fmt.Errorf("%w: KeyHeader %q is not a valid header name", ErrInvalidConfig, c.KeyHeader))
	}
	if c.MaxBodyBytes < 0 || c.MaxBodyBytes > maxBodyLimit {
		errs = append(errs, fmt.Errorf("%w: MaxBodyBytes must be between 1 and %d (0 for the default), got %d", ErrInvalidConfig, maxBodyLimit, c.MaxBodyBytes))
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero fields.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.KeyHeader == "" {
		c.KeyHeader = d.KeyHeader
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	return c
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c < 0x80 && c > ' ' && c != 0x7f && !isDelimiter(c):
		default:
			return false
		}
	}
	return true
}

func isDelimiter(c byte) bool { return strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 }

// API is the HTTP handler. Build it with New.
type API struct {
	cfg       Config
	keyHeader string // canonical form of cfg.KeyHeader, for direct map lookups
	xff       bool   // keyHeader is X-Forwarded-For: take its first address
	dec       *decision.Decider
	log       *slog.Logger
	m         *metrics
	metricsH  http.Handler
	states    sync.Pool // of *checkState
}

// New builds an API that has dec decide each /check, registers its own
// metrics on reg and serves reg on /metrics. reg is normally the registry
// dec registered its metrics on, so that /metrics shows them too. log may
// be nil (nothing is logged).
//
// It takes the concrete *decision.Decider rather than an interface: the
// decision layer is where the fail-open contract (NFR3) and the decision
// metrics live, and a frontend must not be able to bypass them. Tests
// replace the decision.Checker beneath it instead.
func New(cfg Config, dec *decision.Decider, reg *prometheus.Registry, log *slog.Logger) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dec == nil {
		return nil, fmt.Errorf("%w: nil Decider", ErrInvalidConfig)
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: nil Registry", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	a := &API{
		cfg:       cfg,
		keyHeader: http.CanonicalHeaderKey(cfg.KeyHeader),
		dec:       dec,
		log:       log,
		m:         m,
		metricsH:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
	}
	a.xff = a.keyHeader == "X-Forwarded-For"
	a.states.New = func() any { return new(checkState) }
	return a, nil
}

// ServeHTTP routes by exact path; see the package documentation.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/check":
		a.serveCheck(w, r)
	case "/metrics":
		if a.getOrHead(w, r) {
			a.metricsH.ServeHTTP(w, r)
		}
	case "/healthz":
		if a.getOrHead(w, r) {
			writeJSON(w, http.StatusOK, []byte("{\"status\":\"ok\"}\n"))
		}
	case "/readyz":
		if a.getOrHead(w, r) {
			a.serveReady(w)
		}
	case "/cluster":
		if a.getOrHead(w, r) {
			a.serveCluster(w)
		}
	default:
		a.m.bad(reasonNotFound)
		writeError(w, http.StatusNotFound, "no such endpoint; try /check, /metrics, /healthz, /readyz or /cluster")
	}
}

// getOrHead answers 405 to anything but GET and HEAD on the read-only
// endpoints and reports whether the caller should go on.
func (a *API) getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	a.m.bad(reasonMethodNotAllowed)
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "method "+methodForMessage(r.Method)+" not allowed; use GET or HEAD")
	return false
}

func (a *API) serveReady(w http.ResponseWriter) {
	if a.cfg.Ready != nil {
		if err := a.cfg.Ready(); err != nil {
			b := []byte(`{"status":"not ready","error":`)
			b = appendJSONString(b, err.Error())
			writeJSON(w, http.StatusServiceUnavailable, append(b, '}', '\n'))
			return
		}
	}
	writeJSON(w, http.StatusOK, []byte("{\"status\":\"ok\"}\n"))
}

func (a *API) serveCluster(w http.ResponseWriter) {
	if a.cfg.Cluster == nil {
		a.m.bad(reasonNotFound)
		writeError(w, http.StatusNotFound, "not running in cluster mode (start limiterd with -bind-addr or -join)")
		return
	}
	b, err := json.Marshal(a.cfg.Cluster())
	if err != nil {
		a.log.Error("encoding the cluster status", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot encode the cluster status")
		return
	}
	writeJSON(w, http.StatusOK, append(b, '\n'))
}

// methodForMessage cuts a method for an error message: net/http accepts any
// token as a method, however long.
func methodForMessage(m string) string {
	const maxMethod = 32
	if len(m) > maxMethod {
		return m[:maxMethod] + "..."
	}
	return m
}

// writeJSON writes a complete JSON response that must not be cached.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	_, _ = w.Write(body) // a failed write means the client left; nothing to do
}

// writeError writes {"error":msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	b := make([]byte, 0, len(msg)+16)
	b = append(b, `{"error":`...)
	b = appendJSONString(b, msg)
	writeJSON(w, status, append(b, '}', '\n'))
}
