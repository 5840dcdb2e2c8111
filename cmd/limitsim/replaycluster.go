package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"strconv"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// clusterSummary is what a replay on a simulated cluster found: the
// single-node summary plus NFR2 and the sync traffic.
type clusterSummary struct {
	replaySummary
	falseRejections int
	falseFallback   int // of which the budget decided, as a fallback
	stats           simStats
	maxOffsetMs     int64
}

// runClusterReplay replays the trace from r on a simulated cluster of
// cfg.sim.nodes nodes. A line's NODE field picks the node; without one the
// seed's LCG, seeded with cfg.seed, draws it. With cfg.decisions it writes
// "TIME_MS KEY NODE allow|deny" per request to w, in input order.
func runClusterReplay(cfg replayConfig, r io.Reader, w io.Writer) (clusterSummary, error) {
	var sum clusterSummary
	sc := cfg.sim
	sc.limit, sc.window, sc.slices = cfg.limit, cfg.window, cfg.slices
	sim, err := newSimCluster(sc)
	if err != nil {
		return sum, err
	}
	pick := newLCG(cfg.seed)
	ty := newTally(cfg.window.Milliseconds(), cfg.limit)
	tr := newTraceReader(r)
	tr.nodes = sc.nodes
	var (
		d    limiter.Decision
		line []byte
	)
	for {
		req, err := tr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, err
		}
		node := tr.node
		if node < 0 {
			node = pick.Node(sc.nodes)
		}
		if err := sim.check(req.at, req.key, node, &d); err != nil {
			return sum, fmt.Errorf("trace line %d: %w", tr.line, err)
		}
		ty.recordDecision(req.at, req.key, 1, &d)
		if cfg.decisions {
			verdict := "deny"
			if d.Allowed {
				verdict = "allow"
			}
			line = strconv.AppendInt(line[:0], req.at, 10)
			line = append(line, ' ')
			line = append(line, req.key...)
			line = append(line, ' ')
			line = strconv.AppendInt(line, int64(node), 10)
			line = append(line, ' ')
			line = append(line, verdict...)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return sum, err
			}
		}
	}
	if sum.stats, err = sim.finish(); err != nil {
		return sum, err
	}
	sum.requests, sum.accepted, sum.rejected, sum.untracked = ty.requests, ty.accepted, ty.rejected, ty.untracked
	sum.keys = len(ty.keys)
	sum.maxInWindow, sum.maxKey = ty.busiest()
	sum.falseRejections, sum.falseFallback = ty.falseRejections, ty.falseFallback
	sum.maxOffsetMs = sim.maxPeerOffset().Milliseconds()
	return sum, nil
}

// syncDurationMs is the time the sync figures are averaged over: the whole
// sync intervals that the requests span, from the start of the first
// request's to the end of the last request's; 0 without requests.
func (st simStats) syncDurationMs(syncMs int64) int64 {
	if st.requests == 0 {
		return 0
	}
	return (floorDiv(st.lastAt, syncMs)+1)*syncMs - floorDiv(st.firstAt, syncMs)*syncMs
}

// perNodeSecond is total / nodes / (durationMs / 1000), 0 for no duration.
func perNodeSecond(total int64, nodes int, durationMs int64) float64 {
	if durationMs == 0 {
		return 0
	}
	return float64(total) * 1000 / float64(nodes) / float64(durationMs)
}

// writeClusterSummary writes the single-node summary lines, then the
// cluster's, one "# NAME VALUE" line each in a fixed order (see doc.go).
func writeClusterSummary(w io.Writer, cfg replayConfig, s clusterSummary) error {
	if err := writeReplaySummary(w, cfg, s.replaySummary); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	sc := cfg.sim
	syncMs := sc.sync.Milliseconds()
	dur := s.stats.syncDurationMs(syncMs)
	fmt.Fprintf(bw, "# nodes %d\n", sc.nodes)
	fmt.Fprintf(bw, "# sync_ms %d\n", syncMs)
	fmt.Fprintf(bw, "# latency_ms %d\n", sc.latency.Milliseconds())
	fmt.Fprintf(bw, "# skew_ms %d\n", sc.skew.Milliseconds())
	fmt.Fprintf(bw, "# budget %t\n", sc.budget)
	fmt.Fprintf(bw, "# budget_floor %g\n", sc.floor)
	fmt.Fprintf(bw, "# seed %d\n", cfg.seed)
	fmt.Fprintf(bw, "# false_rejections %d\n", s.falseRejections)
	fmt.Fprintf(bw, "# sync_deltas %d\n", s.stats.produced)
	fmt.Fprintf(bw, "# sync_messages %d\n", s.stats.messages)
	fmt.Fprintf(bw, "# sync_bytes %d\n", s.stats.bytes)
	fmt.Fprintf(bw, "# sync_duration_ms %d\n", dur)
	fmt.Fprintf(bw, "# sync_messages_per_node_s %.1f\n", perNodeSecond(int64(s.stats.messages), sc.nodes, dur))
	fmt.Fprintf(bw, "# sync_bytes_per_node_s %.1f\n", perNodeSecond(s.stats.bytes, sc.nodes, dur))
	fmt.Fprintf(bw, "# max_peer_offset_ms %d\n", s.maxOffsetMs)
	// The coordination, after the lines scripts already read.
	fmt.Fprintf(bw, "# coordinate %t\n", !sc.uncoordinated)
	fmt.Fprintf(bw, "# deadline_ms %d\n", cmp.Or(sc.deadline, decision.DefaultDeadline).Milliseconds())
	fmt.Fprintf(bw, "# decided_here %d\n", s.stats.here)
	fmt.Fprintf(bw, "# decided_coordinator %d\n", s.stats.coordinator)
	fmt.Fprintf(bw, "# decided_fallback %d\n", s.stats.fallback)
	fmt.Fprintf(bw, "# decided_on_lease %d\n", s.stats.leased)
	fmt.Fprintf(bw, "# false_rejections_fallback %d\n", s.falseFallback)
	fmt.Fprintf(bw, "# coord_asks %d\n", s.stats.asks)
	fmt.Fprintf(bw, "# coord_ask_bytes %d\n", s.stats.askBytes)
	fmt.Fprintf(bw, "# coord_answers %d\n", s.stats.answers)
	fmt.Fprintf(bw, "# coord_answer_bytes %d\n", s.stats.answerBytes)
	fmt.Fprintf(bw, "# coord_releases %d\n", s.stats.releases)
	fmt.Fprintf(bw, "# coord_release_bytes %d\n", s.stats.releaseBytes)
	return bw.Flush()
}
