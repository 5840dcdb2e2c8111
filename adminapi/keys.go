package adminapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// Keys reads and resets a key's counts: *cluster.Node in a cluster,
// Alone on a single node.
type Keys interface {
	// Inspect fills res, one per limit, with key's window as this node
	// knows it, counting nothing, and returns the key's coordinator ("" on
	// a single node).
	Inspect(ctx context.Context, key string, limits []counter.Limit, res []counter.Result) (coordinator string, err error)
	// Reset erases key's counts under limits on every node, within ctx.
	Reset(ctx context.Context, key string, limits []counter.Limit) (cluster.ResetReport, error)
}

// Alone returns the Keys of a single node: its counter, read with Peek
// and reset with Counter.Reset at now().
func Alone(c *counter.Counter, now func() time.Time) Keys {
	return alone{c: c, now: now}
}

type alone struct {
	c   *counter.Counter
	now func() time.Time
}

func (a alone) Inspect(_ context.Context, key string, limits []counter.Limit, res []counter.Result) (string, error) {
	_, err := a.c.Peek(a.now(), key, 0, limits, res)
	return "", err
}

func (a alone) Reset(_ context.Context, key string, limits []counter.Limit) (cluster.ResetReport, error) {
	ids := make([]string, len(limits))
	for i, l := range limits {
		ids[i] = l.ID()
	}
	r, _, err := a.c.Reset(a.now(), key, ids)
	return cluster.ResetReport{At: time.UnixMilli(r.At)}, err
}

// limitJSON is one limit of a key's rule in an answer.
type limitJSON struct {
	Policy   string `json:"policy"`
	Limit    int64  `json:"limit"`
	WindowMs int64  `json:"window_ms"`
	// GET only.
	Count     *int64 `json:"count,omitempty"`
	Remaining *int64 `json:"remaining,omitempty"`
	ResetMs   *int64 `json:"reset_ms,omitempty"`
}

// inspectJSON is GET's answer.
type inspectJSON struct {
	Key         string      `json:"key"`
	Rule        string      `json:"rule"`
	Shadow      bool        `json:"shadow,omitempty"`
	Node        string      `json:"node,omitempty"`
	Coordinator string      `json:"coordinator,omitempty"`
	Limits      []limitJSON `json:"limits"`
}

// resetJSON is DELETE's answer on a single node.
type resetJSON struct {
	Key     string      `json:"key"`
	Rule    string      `json:"rule"`
	Limits  []limitJSON `json:"limits"`
	ResetAt string      `json:"reset_at"` // RFC 3339, milliseconds, UTC
}

// resetClusterJSON is DELETE's answer in a cluster: the lists are there
// even when empty.
type resetClusterJSON struct {
	resetJSON
	Coordinator string            `json:"coordinator"`
	Applied     []string          `json:"applied"`
	Refused     map[string]string `json:"refused"`
	Unconfirmed []string          `json:"unconfirmed"`
}

// resolve reads the key and rule of a request and the rule's limits, or
// answers the request as bad input and returns false.
func (a *API) resolve(w http.ResponseWriter, r *http.Request) (string, limiter.KeyLimits, bool) {
	key, rule, msg := params(r.URL.RawQuery)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return "", limiter.KeyLimits{}, false
	}
	if err := decision.CheckKey(key); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", limiter.KeyLimits{}, false
	}
	kl, err := a.rules.KeyLimits(key, rule)
	if err != nil {
		if bad := decision.BadInput(err, limiter.Request{Key: key, Rule: rule}); bad != nil {
			writeError(w, http.StatusBadRequest, bad.Error())
		} else {
			a.log.Error("resolving a key's rule failed", "err", err)
			writeError(w, http.StatusInternalServerError, "resolving the key's rule failed")
		}
		return "", limiter.KeyLimits{}, false
	}
	return key, kl, true
}

func limitsJSON(kl limiter.KeyLimits) []limitJSON {
	out := make([]limitJSON, len(kl.Specs))
	for i, s := range kl.Specs {
		out[i] = limitJSON{Policy: s.Policy, Limit: s.Limit, WindowMs: s.Window.Milliseconds()}
	}
	return out
}

func (a *API) inspect(w http.ResponseWriter, r *http.Request) {
	key, kl, ok := a.resolve(w, r)
	if !ok {
		return
	}
	ans := inspectJSON{Key: key, Rule: kl.Rule, Shadow: kl.Shadow, Node: a.cfg.Node, Limits: limitsJSON(kl)}
	if len(kl.Limits) > 0 {
		res := make([]counter.Result, len(kl.Limits))
		coord, err := a.keys.Inspect(r.Context(), key, kl.Limits, res)
		if err != nil {
			a.log.Error("inspecting a key failed", "rule", kl.Rule, "err", err)
			writeError(w, http.StatusInternalServerError, "reading the key's counts failed")
			return
		}
		ans.Coordinator = coord
		for i := range res {
			c, rem, rst := res[i].Count, res[i].Remaining, res[i].Reset.Milliseconds()
			ans.Limits[i].Count, ans.Limits[i].Remaining, ans.Limits[i].ResetMs = &c, &rem, &rst
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

func (a *API) reset(w http.ResponseWriter, r *http.Request) {
	key, kl, ok := a.resolve(w, r)
	if !ok {
		return
	}
	if len(kl.Limits) == 0 {
		writeError(w, http.StatusNotFound, "no rule governs key "+strconv.Quote(truncate(key))+": it is never counted, so there is nothing to reset")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ResetTimeout)
	defer cancel()
	rep, err := a.keys.Reset(ctx, key, kl.Limits)
	attrs := []any{"rule", kl.Rule, "key_sha256", keyHash(key)}
	if err != nil {
		a.resets.WithLabelValues(resultFailed).Inc()
		a.log.Warn("key reset failed: nothing is claimed", append(attrs, "err", err)...)
		status := http.StatusServiceUnavailable
		if !errors.Is(err, cluster.ErrResetUnanswered) && !errors.Is(err, cluster.ErrResetRefused) && !errors.Is(err, counter.ErrTooManyResets) {
			status = http.StatusInternalServerError
		}
		writeError(w, status, "reset failed, nothing is claimed (it may have been applied on some nodes or none; asking again is safe): "+err.Error())
		return
	}
	result := resultApplied
	if len(rep.Refused)+len(rep.Unconfirmed) > 0 {
		result = resultPartial
	}
	a.resets.WithLabelValues(result).Inc()
	ans := resetJSON{Key: key, Rule: kl.Rule, Limits: limitsJSON(kl), ResetAt: rep.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	attrs = append(attrs, "result", result, "reset_at", ans.ResetAt)
	if rep.Coordinator == "" {
		a.log.Log(r.Context(), slog.LevelInfo, "key reset", attrs...)
		writeJSON(w, http.StatusOK, ans)
		return
	}
	cans := resetClusterJSON{resetJSON: ans, Coordinator: rep.Coordinator,
		Applied: orEmpty(rep.Applied), Refused: rep.Refused, Unconfirmed: orEmpty(rep.Unconfirmed)}
	if cans.Refused == nil {
		cans.Refused = map[string]string{}
	}
	attrs = append(attrs, "coordinator", rep.Coordinator, "applied", len(rep.Applied))
	if len(rep.Unconfirmed) > 0 {
		attrs = append(attrs, "unconfirmed", rep.Unconfirmed)
	}
	if len(rep.Refused) > 0 {
		attrs = append(attrs, "refused", rep.Refused)
	}
	a.log.Log(r.Context(), slog.LevelInfo, "key reset", attrs...)
	writeJSON(w, http.StatusOK, cans)
}

// orEmpty is s, or an empty list for nil: JSON's [] rather than null.
func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// keyHash is what the logs say of a key: the first 8 bytes of its
// SHA-256, in hex.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
