package replay

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"strconv"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// ClusterSummary is what a replay on a simulated cluster found: the
// single-node summary plus NFR2 and the sync traffic.
type ClusterSummary struct {
	Summary
	FalseRejections int
	FalseFallback   int // of which the budget decided, as a fallback
	Stats           clustersim.Stats
	MaxOffsetMs     int64
}

// simConfig is cfg.Sim with the replay's limit.
func simConfig(cfg Config) clustersim.Config {
	sc := cfg.Sim
	sc.Limit, sc.Window, sc.Slices = cfg.Limit, cfg.Window, cfg.Slices
	return sc
}

// Validate builds what cfg describes and drops it: the counter's limit on
// one node, or with Sim.Nodes > 0 the simulated cluster, whose counter,
// limiter and simulator check every setting. A caller reports a bad
// setting before reading the trace.
func (cfg Config) Validate() error {
	if cfg.Sim.Nodes == 0 {
		_, err := New(cfg)
		return err
	}
	_, err := clustersim.New(simConfig(cfg))
	return err
}

// RunCluster replays the trace from r on a simulated cluster of
// cfg.Sim.Nodes nodes. A line's NODE field picks the node; without one the
// seed's LCG, seeded with cfg.Seed, draws it. With cfg.Decisions it writes
// "TIME_MS KEY NODE allow|deny" per request to w, in input order.
func RunCluster(cfg Config, r io.Reader, w io.Writer) (ClusterSummary, error) {
	var sum ClusterSummary
	sc := simConfig(cfg)
	sim, err := clustersim.New(sc)
	if err != nil {
		return sum, err
	}
	pick := seed.NewLCG(cfg.Seed)
	ty := clustersim.NewTally(cfg.Window.Milliseconds(), cfg.Limit)
	tr := NewReader(r, sc.Nodes)
	var (
		d    limiter.Decision
		line []byte
	)
	for {
		req, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, err
		}
		node := tr.node
		if node < 0 {
			node = pick.Node(sc.Nodes)
		}
		if err := sim.Check(req.At, req.Key, node, 1, &d); err != nil {
			return sum, fmt.Errorf("trace line %d: %w", tr.line, err)
		}
		ty.RecordDecision(req.At, req.Key, 1, &d)
		if cfg.Decisions {
			verdict := "deny"
			if d.Allowed {
				verdict = "allow"
			}
			line = strconv.AppendInt(line[:0], req.At, 10)
			line = append(line, ' ')
			line = append(line, req.Key...)
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
	if sum.Stats, err = sim.Finish(); err != nil {
		return sum, err
	}
	sum.Requests, sum.Accepted, sum.Rejected, sum.Untracked = ty.Requests, ty.Accepted, ty.Rejected, ty.Untracked
	sum.Keys = ty.Keys()
	sum.MaxInWindow, sum.MaxKey = ty.Busiest()
	sum.FalseRejections, sum.FalseFallback = ty.FalseRejections, ty.FalseFallback
	sum.MaxOffsetMs = sim.MaxPeerOffset().Milliseconds()
	return sum, nil
}

// perNodeSecond is total / nodes / (durationMs / 1000), 0 for no duration.
func perNodeSecond(total int64, nodes int, durationMs int64) float64 {
	if durationMs == 0 {
		return 0
	}
	return float64(total) * 1000 / float64(nodes) / float64(durationMs)
}

// WriteClusterSummary writes the single-node summary lines, then the
// cluster's, one "# NAME VALUE" line each in a fixed order (see doc.go).
func WriteClusterSummary(w io.Writer, cfg Config, s ClusterSummary) error {
	if err := WriteSummary(w, cfg, s.Summary); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	sc := cfg.Sim
	syncMs := sc.Sync.Milliseconds()
	dur := s.Stats.SyncDurationMs(syncMs)
	fmt.Fprintf(bw, "# nodes %d\n", sc.Nodes)
	fmt.Fprintf(bw, "# sync_ms %d\n", syncMs)
	fmt.Fprintf(bw, "# latency_ms %d\n", sc.Latency.Milliseconds())
	fmt.Fprintf(bw, "# skew_ms %d\n", sc.Skew.Milliseconds())
	fmt.Fprintf(bw, "# budget %t\n", sc.Budget)
	fmt.Fprintf(bw, "# budget_floor %g\n", sc.Floor)
	fmt.Fprintf(bw, "# seed %d\n", cfg.Seed)
	fmt.Fprintf(bw, "# false_rejections %d\n", s.FalseRejections)
	fmt.Fprintf(bw, "# sync_deltas %d\n", s.Stats.Produced)
	fmt.Fprintf(bw, "# sync_messages %d\n", s.Stats.Messages)
	fmt.Fprintf(bw, "# sync_bytes %d\n", s.Stats.Bytes)
	fmt.Fprintf(bw, "# sync_duration_ms %d\n", dur)
	fmt.Fprintf(bw, "# sync_messages_per_node_s %.1f\n", perNodeSecond(int64(s.Stats.Messages), sc.Nodes, dur))
	fmt.Fprintf(bw, "# sync_bytes_per_node_s %.1f\n", perNodeSecond(s.Stats.Bytes, sc.Nodes, dur))
	fmt.Fprintf(bw, "# max_peer_offset_ms %d\n", s.MaxOffsetMs)
	// The coordination, after the lines scripts already read.
	fmt.Fprintf(bw, "# coordinate %t\n", !sc.Uncoordinated)
	fmt.Fprintf(bw, "# deadline_ms %d\n", cmp.Or(sc.Deadline, decision.DefaultDeadline).Milliseconds())
	fmt.Fprintf(bw, "# decided_here %d\n", s.Stats.Here)
	fmt.Fprintf(bw, "# decided_coordinator %d\n", s.Stats.Coordinator)
	fmt.Fprintf(bw, "# decided_fallback %d\n", s.Stats.Fallback)
	fmt.Fprintf(bw, "# decided_on_lease %d\n", s.Stats.Leased)
	fmt.Fprintf(bw, "# false_rejections_fallback %d\n", s.FalseFallback)
	fmt.Fprintf(bw, "# coord_asks %d\n", s.Stats.Asks)
	fmt.Fprintf(bw, "# coord_ask_bytes %d\n", s.Stats.AskBytes)
	fmt.Fprintf(bw, "# coord_answers %d\n", s.Stats.Answers)
	fmt.Fprintf(bw, "# coord_answer_bytes %d\n", s.Stats.AnswerBytes)
	fmt.Fprintf(bw, "# coord_releases %d\n", s.Stats.Releases)
	fmt.Fprintf(bw, "# coord_release_bytes %d\n", s.Stats.ReleaseBytes)
	return bw.Flush()
}
