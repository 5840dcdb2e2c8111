package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

// reloader keeps a Limiter's rules in step with a rule file. It reloads on
// demand (SIGHUP) and when the file changes on disk. An invalid new file
// keeps the old rules running; the error is logged and counted.
type reloader struct {
	path string
	lim  *limiter.Limiter
	log  *slog.Logger
	// applied, if set, is called after new rules are in force.
	applied func()

	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastTime    prometheus.Gauge

	mu  sync.Mutex
	sum [sha256.Size]byte // of the file content last applied
	// failing: the last load failed, so the file on disk is not the rules
	// in force (limiterd_rules_last_reload_successful is 0) until a load
	// succeeds or the file is back to the content in force.
	failing bool
}

func newReloader(path string, lim *limiter.Limiter, sum [sha256.Size]byte, reg prometheus.Registerer, log *slog.Logger, applied func()) *reloader {
	r := &reloader{
		path: path, lim: lim, log: log, sum: sum, applied: applied,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_rule_reloads_total",
			Help: "Rule file reloads by result (success, failure).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "limiterd_rules_last_reload_successful",
			Help: "1 if the last rule reload succeeded (or none was tried), 0 if the old rules are still running because the new file is invalid.",
		}),
		lastTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "limiterd_rules_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful rule load.",
		}),
	}
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	r.lastSuccess.Set(1)
	r.lastTime.SetToCurrentTime()
	reg.MustRegister(r.reloads, r.lastSuccess, r.lastTime)
	return r
}

// loadRules reads and parses the rule file, returning the rules and the
// content's hash.
func loadRules(path string) (*limiter.RuleSet, [sha256.Size]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, [sha256.Size]byte{}, fmt.Errorf("read rules: %w", err)
	}
	rs, err := limiter.Parse(path, data)
	return rs, sha256.Sum256(data), err
}

// reload loads the file and applies it. With force false it does nothing
// when the content is unchanged (a file event that changed nothing).
func (r *reloader) reload(force bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data, err := os.ReadFile(r.path)
	if err == nil {
		sum := sha256.Sum256(data)
		if !force && bytes.Equal(sum[:], r.sum[:]) {
			if r.failing {
				// The file is back to the rules in force (an invalid
				// edit undone): what is on disk is what runs again.
				r.failing = false
				r.lastSuccess.Set(1)
				r.log.Info("rule file is back to the rules in force", "file", r.path, "trigger", why)
			}
			return
		}
		var rs *limiter.RuleSet
		if rs, err = limiter.Parse(r.path, data); err == nil {
			if err = r.lim.SetRules(rs); err == nil {
				r.sum, r.failing = sum, false
				r.reloads.WithLabelValues("success").Inc()
				r.lastSuccess.Set(1)
				r.lastTime.SetToCurrentTime()
				r.log.Info("rules reloaded", "file", r.path, "rules", len(rs.Rules), "trigger", why)
				if r.applied != nil {
					r.applied()
				}
				return
			}
		}
	}
	r.reloads.WithLabelValues("failure").Inc()
	r.failing = true
	r.lastSuccess.Set(0)
	r.log.Error("rules reload failed; the old rules keep running", "file", r.path, "trigger", why, "err", err)
}

// watch reloads on every value from hup and on changes to the file until
// ctx ends. It watches the file's directory, not the file, so that editors
// that write a new file and rename it over the old one, and Kubernetes
// ConfigMap symlink swaps, are seen too. Bursts of events are coalesced.
func (r *reloader) watch(ctx context.Context, hup <-chan os.Signal) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch rules: %w", err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(r.path)); err != nil {
		return fmt.Errorf("watch rules directory: %w", err)
	}
	const settle = 100 * time.Millisecond
	timer := time.NewTimer(settle)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			r.reload(true, "SIGHUP")
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) {
				continue
			}
			timer.Reset(settle)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("rules watcher error", "err", err)
		case <-timer.C:
			r.reload(false, "file change")
		}
	}
}
