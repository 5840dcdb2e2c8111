package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

// reloader keeps a Limiter's rules in step with the rule files (-rules,
// limiterd's YAML and envoyproxy/ratelimit files side by side). It reloads
// on demand (SIGHUP) and when a file changes on disk. An invalid new file
// keeps the old rules, of every file, running; the error is logged and
// counted.
type reloader struct {
	paths []string
	lim   *limiter.Limiter
	log   *slog.Logger
	// applied, if set, is called after new rules are in force.
	applied func()

	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastTime    prometheus.Gauge

	mu  sync.Mutex
	sum [sha256.Size]byte // limiter.Files.Sum of the files last applied
	// failing: the last load failed, so the file on disk is not the rules
	// in force (limiterd_rules_last_reload_successful is 0) until a load
	// succeeds or the file is back to the content in force.
	failing bool
}

func newReloader(paths []string, lim *limiter.Limiter, sum [sha256.Size]byte, reg prometheus.Registerer, log *slog.Logger, applied func()) *reloader {
	r := &reloader{
		paths: paths, lim: lim, log: log, sum: sum, applied: applied,
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

// reload loads the files and applies them. With force false it does
// nothing when the content is unchanged (a file event that changed nothing).
func (r *reloader) reload(force bool, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := strings.Join(r.paths, ",")
	files, err := limiter.ReadFiles(r.paths...)
	if err == nil {
		if !force && files.Sum == r.sum {
			if r.failing {
				// The files are back to the rules in force (an invalid
				// edit undone): what is on disk is what runs again.
				r.failing = false
				r.lastSuccess.Set(1)
				r.log.Info("rule files are back to the rules in force", "files", names, "trigger", why)
			}
			return
		}
		var rs *limiter.RuleSet
		if rs, err = files.Parse(); err == nil {
			if err = r.lim.SetRules(rs); err == nil {
				r.sum, r.failing = files.Sum, false
				r.reloads.WithLabelValues("success").Inc()
				r.lastSuccess.Set(1)
				r.lastTime.SetToCurrentTime()
				r.log.Info("rules reloaded", "files", names, "rules", len(rs.Rules), "trigger", why)
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
	r.log.Error("rules reload failed; the old rules keep running", "files", names, "trigger", why, "err", err)
}

// concerns reports whether a file event in a watched directory may change
// the rules: an event on a rule file itself (written, or renamed over), or
// on a name Kubernetes' atomic writer swaps ("..data" and the
// "..2026_12_01..." directories behind a ConfigMap's symlinks). Any other
// file in the directory is none of ours: a log written there all the time
// would otherwise keep resetting the settle timer and no reload would ever
// run.
func (r *reloader) concerns(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, "..") {
		return true
	}
	for _, p := range r.paths {
		if filepath.Base(p) == base && filepath.Clean(filepath.Dir(p)) == filepath.Clean(filepath.Dir(name)) {
			return true
		}
	}
	return false
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
	dirs := map[string]bool{}
	for _, p := range r.paths {
		if d := filepath.Dir(p); !dirs[d] {
			dirs[d] = true
			if err := w.Add(d); err != nil {
				return fmt.Errorf("watch rules directory: %w", err)
			}
		}
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
			if ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) || !r.concerns(ev.Name) {
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
