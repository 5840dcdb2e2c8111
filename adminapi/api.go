package adminapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate and by New
// for a missing dependency.
var ErrInvalidConfig = errors.New("adminapi: invalid config")

// maxResetTimeout bounds Config.ResetTimeout: an operator's request, not
// a wait that should hold a connection for long.
const maxResetTimeout = time.Minute

// Config configures an API.
type Config struct {
	// Node is this node's name, reported as the node whose view GET
	// shows; "" on a single node.
	Node string
	// ResetTimeout is the longest a reset waits, for the key's
	// coordinator's answer and then for the nodes it told to confirm.
	// Default 2s, at most 1m.
	ResetTimeout time.Duration
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{ResetTimeout: 2 * time.Second}
}

// Validate reports every invalid field, each error wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if c.ResetTimeout <= 0 || c.ResetTimeout > maxResetTimeout {
		errs = append(errs, fmt.Errorf("%w: ResetTimeout must be positive and at most %v, got %v", ErrInvalidConfig, maxResetTimeout, c.ResetTimeout))
	}
	return errors.Join(errs...)
}

// Rules resolves the rule and limits of a key as the limiter checks it;
// *limiter.Limiter implements it.
type Rules interface {
	KeyLimits(key, rule string) (limiter.KeyLimits, error)
}

// API is the admin API's http.Handler.
type API struct {
	cfg    Config
	rules  Rules
	keys   Keys
	log    *slog.Logger
	resets *prometheus.CounterVec
}

// Reset outcomes, the values of limiterd_admin_resets_total's result.
const (
	resultApplied = "applied"
	resultPartial = "partial"
	resultFailed  = "failed"
)

// New returns the admin API over rules and keys, registering its metric on
// reg. log may be nil.
func New(cfg Config, rules Rules, keys Keys, reg prometheus.Registerer, log *slog.Logger) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rules == nil || keys == nil || reg == nil {
		return nil, fmt.Errorf("%w: nil rules, keys or registerer", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &API{cfg: cfg, rules: rules, keys: keys, log: log, resets: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "limiterd_admin_resets_total",
		Help: "Key resets asked of this node's admin API, by result: applied (by every node told), partial (by the key's coordinator, not by every node told), failed (no answer, or refused: nothing claimed).",
	}, []string{"result"})}
	for _, r := range []string{resultApplied, resultPartial, resultFailed} {
		a.resets.WithLabelValues(r)
	}
	if err := reg.Register(a.resets); err != nil {
		return nil, fmt.Errorf("adminapi: register metrics: %w", err)
	}
	return a, nil
}

// ServeHTTP routes /v1/keys by method.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/keys" {
		writeError(w, http.StatusNotFound, "no such path; the admin API is /v1/keys?key=K[&rule=R], GET to inspect and DELETE to reset")
		return
	}
	switch r.Method {
	case http.MethodGet:
		a.inspect(w, r)
	case http.MethodDelete:
		a.reset(w, r)
	default:
		w.Header().Set("Allow", "GET, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "method "+strconv.Quote(truncate(r.Method))+" not allowed; use GET or DELETE")
	}
}

// params reads key and rule from a query, strictly: an unknown or
// repeated parameter is an error rather than ignored, as on /check.
func params(raw string) (key, rule string, msg string) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", "", "invalid query: " + err.Error()
	}
	for name, vs := range q {
		switch {
		case name != "key" && name != "rule":
			return "", "", "unknown query parameter " + strconv.Quote(truncate(name)) + "; the parameters are key and rule"
		case len(vs) > 1:
			return "", "", "query parameter " + name + " is given more than once"
		}
	}
	if _, ok := q["key"]; !ok {
		return "", "", "missing key: no key parameter"
	}
	return q.Get("key"), q.Get("rule"), ""
}

// truncate cuts client input short for a message.
func truncate(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// writeJSON writes v as the JSON body of a status answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}
