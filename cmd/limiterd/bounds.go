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

// boundsWatch tells operators which limits in force the counter cannot keep
// within 1 + Tolerance, at the moment that becomes true: after a rule load
// and after the node count changes, both of which change
// counter.(*Counter).WorstCase. It exports the ratio of every limit as
// limiterd_rule_worst_case_ratio, logs one warning per limit when it goes
// above and one info line when it comes back.
type boundsWatch struct {
	lim       *limiter.Limiter
	log       *slog.Logger
	tolerance float64 // the counter's
	promised  float64 // 1 + Tolerance, for messages
	// cc is the counter's cluster settings when clustered (the zero
	// ClusterConfig, a single node's, else); b.nodes overrides its Nodes.
	cc        counter.ClusterConfig
	clustered bool
	ratio     *prometheus.GaugeVec

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
	b := &boundsWatch{
		lim: lim, log: log, tolerance: cfg.Tolerance, promised: 1 + cfg.Tolerance, nodes: 1,
		series: make(map[boundKey]bool), above: make(map[boundKey]bool),
		ratio: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "limiterd_rule_worst_case_ratio",
			Help: "Most requests of one key the counter may accept in a window-long interval, divided by the limit, with the current node count and sync interval. Above 1 + tolerance (1.1) the cluster does not keep the limit's promise: alert on it.",
		}, []string{"rule", "limit"}),
	}
	if cc != nil {
		b.cc, b.clustered = *cc, true
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
		if lb.WorstCase <= counter.BoundOf(b.tolerance, b.cc, lb.Limit, lb.Window).Promised {
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
// bound on b.nodes nodes, back within it: counter.Advise's figures, in
// limiterd's flags. Under b.mu.
func (b *boundsWatch) advice(limit int64, window time.Duration) string {
	cc := b.cc
	cc.Nodes = b.nodes
	// A single node keeps every limit within its bound; an invalid count
	// is one the counter refused too.
	if !b.clustered || cc.Validate() != nil {
		return ""
	}
	a, ok := counter.Advise(b.tolerance, cc, limit, window)
	if !ok {
		return ""
	}
	return adviceText(a, b.promised)
}

// adviceText words a in limiterd's flags, with the figures each setting
// gives. promised is 1 + Tolerance.
func adviceText(a counter.Advice, promised float64) string {
	text := ""
	switch {
	case a.EnableBudget && a.BudgetBound <= a.Promised:
		text = fmt.Sprintf("turn the per-node budget on (-budget=true) on every node: without it each node may admit the whole limit between two syncs; with it the worst case is %d (%vx)",
			a.BudgetBound, ratioOf(a.BudgetBound, a.Limit))
	case a.EnableBudget:
		text = "turn the per-node budget on (-budget=true) on every node, and then: " + syncAdviceText(a, promised)
	default:
		text = syncAdviceText(a, promised)
	}
	if a.EnableCoordinator {
		text += "; or turn -coordinate on (on every node): the key's coordinator then decides at the margin and keeps every limit within its bound on a healthy cluster"
	}
	return text
}

// syncAdviceText is adviceText for the budget on: a shorter sync interval,
// or why none is short enough.
func syncAdviceText(a counter.Advice, promised float64) string {
	switch {
	case a.Sync > 0:
		return fmt.Sprintf("shorten -sync-interval to %v or less on every node (worst case then %d, %vx), or give the limit a longer window",
			a.Sync, a.SyncBound, ratioOf(a.SyncBound, a.Limit))
	case a.Floor1ms > 1:
		return fmt.Sprintf("no sync interval fits: even at 1ms each node may admit %d requests of a key before its peers hear of them (worst case %d); give the limit a longer window",
			a.Floor1ms, a.Bound1ms)
	}
	text := fmt.Sprintf("the limit is too small to share among %d nodes: whatever the sync interval, each node may admit a request of a key before its peers hear of it, and those %d plus slice tails of %d exceed the %d over %d that %vx allows",
		a.Nodes, a.Nodes, a.Tails, a.Promised-a.Limit, a.Limit, promised)
	if a.Smallest > 0 {
		text += fmt.Sprintf("; the smallest larger limit per %v that a short enough sync interval keeps within %vx on %d nodes is %d", a.Window, promised, a.Nodes, a.Smallest)
	}
	return text + "; raise the limit, use fewer nodes, or accept the ratio"
}

// ratioOf is worst / limit, rounded for messages.
func ratioOf(worst, limit int64) float64 { return round3(float64(worst) / float64(limit)) }

// round3 rounds a ratio to three decimals for messages.
func round3(r float64) float64 { return math.Round(r*1000) / 1000 }
