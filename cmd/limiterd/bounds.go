package main

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// minLimitScan bounds the search for the smallest limit a cluster can share
// (about 1 ms of arithmetic): enough for a few thousand nodes.
const minLimitScan = 1 << 16

// boundsWatch tells operators which limits in force the counter cannot keep
// within 1 + Tolerance, at the moment that becomes true: after a rule load
// and after the node count changes, both of which change
// counter.(*Counter).WorstCase. It exports the ratio of every limit as
// limiterd_rule_worst_case_ratio, logs one warning per limit when it goes
// above and one info line when it comes back.
type boundsWatch struct {
	lim      *limiter.Limiter
	log      *slog.Logger
	promised float64 // 1 + Tolerance, for messages
	cc       counter.ClusterConfig
	ratio    *prometheus.GaugeVec

	// alone is a counter in single-node mode with the real counter's
	// tolerance: its WorstCase is the promised bound, L + floor(Tolerance x
	// L), computed exactly as the counter does. model (nil on a single
	// node) is one in cluster mode that what-ifs reconfigure, so that the
	// advice comes from the counter's own arithmetic, not a copy of it.
	alone *counter.Counter
	model *counter.Counter

	mu     sync.Mutex
	nodes  int
	series map[boundKey]bool // label sets exported
	above  map[boundKey]bool // limits warned about and still above
}

// boundKey names one limit of one rule, as the gauge labels it.
type boundKey struct{ rule, limit string }

// newBoundsWatch watches lim, whose counter runs with cfg and, on a cluster
// node, with cc (nil on a single node). Call check once the rules are
// loaded, and setNodes from cluster.Config.OnNodesChanged.
func newBoundsWatch(lim *limiter.Limiter, cfg counter.Config, cc *counter.ClusterConfig, reg prometheus.Registerer, log *slog.Logger) (*boundsWatch, error) {
	scratch := counter.Config{Shards: 1, MaxKeys: 1, Tolerance: cfg.Tolerance}
	alone, err := counter.New(scratch)
	if err != nil {
		return nil, fmt.Errorf("bounds: %w", err)
	}
	b := &boundsWatch{
		lim: lim, log: log, promised: 1 + cfg.Tolerance, alone: alone, nodes: 1,
		series: make(map[boundKey]bool), above: make(map[boundKey]bool),
		ratio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "limiterd_rule_worst_case_ratio",
			Help: "Most requests of one key the counter may accept in a window-long interval, divided by the limit, with the current node count and sync interval. Above 1 + tolerance (1.1) the cluster does not keep the limit's promise: alert on it.",
		}, []string{"rule", "limit"}),
	}
	if cc != nil {
		b.cc = *cc
		if b.model, err = counter.New(scratch); err == nil {
			err = b.model.SetCluster(b.cc)
		}
		if err != nil {
			return nil, fmt.Errorf("bounds: %w", err)
		}
	}
	if err := reg.Register(b.ratio); err != nil {
		return nil, fmt.Errorf("bounds: register metrics: %w", err)
	}
	return b, nil
}

// setNodes records the new node count (the counter already counts with it)
// and checks the limits again.
func (b *boundsWatch) setNodes(alive int) {
	b.mu.Lock()
	b.nodes = alive
	b.mu.Unlock()
	b.check("node count changed")
}

// check recomputes every limit's ratio and logs the limits that went above
// 1 + Tolerance or came back within it since the last check.
//
// A check triggered by a rule reload in the instant between the node's
// SetNodes and its OnNodesChanged sees the new worst cases with the old
// node count: its messages may name that count, and the check the callback
// triggers a moment later finds the same limits above and stays silent.
func (b *boundsWatch) check(trigger string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bounds := b.lim.Bounds()
	// Set the new series before deleting the old ones, rather than Reset,
	// so that a scrape never sees the gauge empty.
	series := make(map[boundKey]bool, len(bounds))
	above := make(map[boundKey]bool)
	for _, lb := range bounds {
		k := boundKey{lb.Rule, lb.LimitText()}
		series[k] = true
		b.ratio.WithLabelValues(k.rule, k.limit).Set(lb.Ratio())
		promised := b.alone.WorstCase(lb.Limit, lb.Window)
		if lb.WorstCase <= promised {
			if b.above[k] {
				b.log.Info("rule limit back within its promised bound", "rule", lb.Rule, "limit", k.limit,
					"worst_case", lb.WorstCase, "ratio", round3(lb.Ratio()), "promised", b.promised, "nodes", b.nodes, "trigger", trigger)
			}
			continue
		}
		above[k] = true
		if b.above[k] {
			continue
		}
		b.log.Warn("rule limit not within its promised bound in this cluster", "rule", lb.Rule, "limit", k.limit,
			"window", lb.Window.String(), "shadow", lb.Shadow, "worst_case", lb.WorstCase, "ratio", round3(lb.Ratio()),
			"promised", b.promised, "nodes", b.nodes, "sync_interval", b.cc.SyncInterval.String(),
			"fix", b.advice(lb.Limit, lb.Window), "trigger", trigger)
	}
	for k := range b.series {
		if !series[k] {
			b.ratio.DeleteLabelValues(k.rule, k.limit)
		}
	}
	b.series, b.above = series, above
}

// advice says what would bring a limit per window, above its promised
// bound on b.nodes nodes, back within it. Every figure in it is the model
// counter's WorstCase under the settings it names.
func (b *boundsWatch) advice(limit int64, window time.Duration) string {
	cc := b.cc
	cc.Nodes = b.nodes
	// A single node keeps every limit within its bound; an invalid count
	// is one the counter refused too.
	if b.model == nil || cc.Validate() != nil {
		return ""
	}
	// The what-ifs below vary the budget's settings: its bound is the one
	// that depends on them.
	return b.adviceFor(limit, window)
}

// adviceFor is advice, with the coordinator's suggestion when it is off.
func (b *boundsWatch) adviceFor(limit int64, window time.Duration) string {
	a := b.budgetAdvice(limit, window)
	if !b.cc.Coordinated {
		a += "; or turn -coordinate on (on every node): the key's coordinator then decides at the margin and keeps every limit within its bound on a healthy cluster"
	}
	return a
}

// budgetAdvice is advice for a cluster whose nodes decide alone with the
// budget (-coordinate=false, or a coordinator that cannot be reached).
func (b *boundsWatch) budgetAdvice(limit int64, window time.Duration) string {
	promised := b.alone.WorstCase(limit, window)
	ratio := func(w int64) float64 { return round3(float64(w) / float64(limit)) }
	prefix := ""
	if !b.cc.Budget {
		w := b.whatIf(b.cc.SyncInterval, true, limit, window)
		if w <= promised {
			return fmt.Sprintf("turn the per-node budget on (-budget=true) on every node: without it each node may admit the whole limit between two syncs; with it the worst case is %d (%vx)",
				w, ratio(w))
		}
		prefix = "turn the per-node budget on (-budget=true) on every node, and then: "
	}
	if s := b.longestSync(limit, window); s > 0 {
		w := b.whatIf(s, true, limit, window)
		return prefix + fmt.Sprintf("shorten -sync-interval to %v or less on every node (worst case then %d, %vx), or give the limit a longer window",
			s, w, ratio(w))
	}

	// Not even a 1 ms sync interval fits. Its worst case is L + N·f + tail;
	// without the budget it is N·L + tail, which gives the tail, hence f.
	n := int64(b.nodes)
	at1 := b.whatIf(time.Millisecond, true, limit, window)
	tail := b.whatIf(time.Millisecond, false, limit, window) - n*limit
	if f := (at1 - limit - tail) / n; f > 1 {
		return prefix + fmt.Sprintf("no sync interval fits: even at 1ms each node may admit %d requests of a key before its peers hear of them (worst case %d); give the limit a longer window",
			f, at1)
	}
	msg := fmt.Sprintf("the limit is too small to share among %d nodes: whatever the sync interval, each node may admit a request of a key before its peers hear of it, and those %d plus slice tails of %d exceed the %d over %d that %vx allows",
		n, n, tail, promised-limit, limit, b.promised)
	if lmin := b.smallestShareable(limit, window); lmin > 0 {
		msg += fmt.Sprintf("; the smallest larger limit per %v that a short enough sync interval keeps within %vx on %d nodes is %d", window, b.promised, n, lmin)
	}
	return prefix + msg + "; raise the limit, use fewer nodes, or accept the ratio"
}

// whatIf is the worst case of a limit per window on b.nodes nodes with the
// given sync interval and budget, the rest of the cluster settings as they
// are. b.model is only used here and under b.mu.
func (b *boundsWatch) whatIf(sync time.Duration, budget bool, limit int64, window time.Duration) int64 {
	cc := b.cc
	cc.Nodes, cc.SyncInterval, cc.Budget, cc.Coordinated = b.nodes, sync, budget, false
	if err := b.model.SetCluster(cc); err != nil {
		// Only a node count beyond what the counter accepts; SetNodes
		// refused it too, so the counter never ran with it.
		return math.MaxInt64
	}
	return b.model.WorstCase(limit, window)
}

// longestSync returns the longest sync interval, in whole milliseconds and
// at most the current one, that keeps a limit per window within its
// promised bound on b.nodes nodes with the budget, or 0 if not even 1 ms
// does. The worst case never falls as the interval grows, so a binary
// search finds it.
func (b *boundsWatch) longestSync(limit int64, window time.Duration) time.Duration {
	promised := b.alone.WorstCase(limit, window)
	fits := func(ms int64) bool {
		return b.whatIf(time.Duration(ms)*time.Millisecond, true, limit, window) <= promised
	}
	lo, hi := int64(1), max(b.cc.SyncInterval.Milliseconds(), 1)
	if !fits(lo) {
		return 0
	}
	for lo < hi { // fits(lo)
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return time.Duration(lo) * time.Millisecond
}

// smallestShareable returns the smallest limit above limit per window that
// fits its promised bound on b.nodes nodes at a 1 ms sync interval (the
// best case) with the budget, or 0 if none within minLimitScan above does.
func (b *boundsWatch) smallestShareable(limit int64, window time.Duration) int64 {
	for l := limit + 1; l <= min(limit+minLimitScan, counter.MaxLimit); l++ {
		if b.whatIf(time.Millisecond, true, l, window) <= b.alone.WorstCase(l, window) {
			return l
		}
	}
	return 0
}

// round3 rounds a ratio to three decimals for messages.
func round3(r float64) float64 { return math.Round(r*1000) / 1000 }
