package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/cpuprofile"
	"github.com/limiterd/limiterd/internal/scale/nodecost"
)

// runScaleCmd is "limitsim scale": a node's cost with the coordinator on,
// 8 to 1,000 nodes (issue 20); "limitsim scale --mesh" is the full mesh's
// study (issue 4).
func runScaleCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--mesh" || args[0] == "-mesh") {
		return runMeshCmd(args[1:], stdin, stdout, stderr)
	}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	cfg := nodecost.DefaultConfig()
	nodes := nodeList(cfg.Nodes)
	scenarios := scenarioList(cfg.Scenarios)
	seconds := cfg.Duration.Seconds()
	asJSON, from, svgOut, cpuProfile, replayDir, rounds := false, "", "", "", "", 3
	fs.Var(&nodes, "nodes", fmt.Sprintf("comma-separated cluster `SIZES`, each between 2 and %d", clustersim.MaxNodes))
	fs.Var(&scenarios, "scenarios", "comma-separated `LIST` of scenarios: healthy, fallback (the cut node silent for a while), partition (the cut node cut off, still serving)")
	fs.Int64Var(&cfg.RatePerNode, "rate-per-node", cfg.RatePerNode, "checks per second `R` on each node")
	fs.IntVar(&cfg.KeysPerNode, "keys-per-node", cfg.KeysPerNode, "distinct keys are `K` x N")
	fs.Float64Var(&cfg.Zipf, "zipf", cfg.Zipf, "exponent `S` (> 1) of the keys' Zipf popularity")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed `S` of the key draw (and of the nodes' draw with --spread random)")
	fs.Func("spread", "how the checks reach the nodes, `HOW`: round-robin (check i at node i mod N, the default) or random (each at a node drawn at random, as a random or least-loaded balancer spreads them)", func(v string) error {
		cfg.Spread = nodecost.Spread(v)
		return nil
	})
	fs.Float64Var(&seconds, "seconds", seconds, "model seconds `S` of load (60: one window; less for a quick look, e.g. 0.05)")
	fs.IntVar(&cfg.Judged, "judge", cfg.Judged, "judge the `K` hottest keys exactly (0: every key expected at a quarter of the limit in a window)")
	fs.DurationVar(&cfg.CutAt, "cut-at", cfg.CutAt, "model time `D` at which the fallback and partition scenarios cut the cut node off")
	fs.DurationVar(&cfg.CutFor, "cut-for", cfg.CutFor, "how long `D` the cut node stays cut off")
	fs.IntVar(&cfg.CutNode, "cut-node", cfg.CutNode, "the node `I` the fallback and partition scenarios cut off (node-I; below the smallest size less 1)")
	fs.DurationVar(&cfg.Sync, "sync", cfg.Sync, "every node's sync interval `D`")
	fs.DurationVar(&cfg.Latency, "latency", cfg.Latency, fmt.Sprintf("how long `D` every message takes to reach its peer, whole ms, its round trip below the %v ask deadline (0: none; a LAN's 1ms makes each ask a 2 ms round trip)", decision.DefaultDeadline))
	fs.Float64Var(&cfg.Grace, "delivery-grace", cfg.Grace, "share `G` of the sync interval after each tick within which a node's changes must reach its peers, 0 to 1, as limiterd's -sync-delivery-grace: a node counts its admissions of the interval before as unseen for that long")
	fs.Float64Var(&cfg.Tolerance, "tolerance", cfg.Tolerance, "share `T` of the limit the cluster may admit past it, above 0 and at most 1; the bound follows")
	fs.Float64Var(&cfg.LeaseShare, "lease-share", cfg.LeaseShare, "share `S` of each key's blind pool lent out as leases, 0 (no leases) to 1; the blind shares get the rest")
	fs.DurationVar(&cfg.LeaseTime, "lease-time", cfg.LeaseTime, "how long `D` a node decides a key on a lease")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "goroutines `W` for each instant's ticks and deliveries (changes no figure but the times)")
	fs.BoolVar(&cfg.Alone, "alone", cfg.Alone, "record node N-1 to a temporary file and replay it on its own after each run: the engine time a node pays on a machine of its own (engine_ns_per_check_alone)")
	fs.StringVar(&cfg.Records, "records", "", "with --alone, keep each run's record in directory `DIR` (made if missing) as SCENARIO-N.rec (--replay reads them)")
	fs.StringVar(&replayDir, "replay", "", "run nothing: replay every record in directory `DIR` (--records) --rounds times, interleaved, and print each one's engine ns per check alone")
	fs.IntVar(&rounds, "rounds", rounds, "rounds `K` of --replay")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object a line instead of the table")
	fs.StringVar(&from, "from", "", "read the rows from `FILE`, lines printed by --json (several runs may be concatenated), instead of running")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE` (go tool pprof reads it)")
	fs.StringVar(&svgOut, "svg", "", "also write a chart of each scenario's costs over the smallest cluster's to `FILE` (one file per scenario: FILE with the scenario's name before its extension when there are several)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim scale [--nodes 8,64,256,1000] [--scenarios healthy,fallback,partition] [--json]
                     [--rate-per-node R] [--keys-per-node K] [--zipf S] [--seed S] [--spread HOW]
                     [--seconds S] [--judge K] [--cut-at D] [--cut-for D] [--cut-node I] [--workers W] [--alone=false]
                     [--latency D] [--sync D] [--delivery-grace G] [--tolerance T] [--lease-share S] [--lease-time D]
                     [--from FILE.jsonl] [--svg FILE.svg] [--cpuprofile FILE] [--records DIR]
       limitsim scale --replay DIR [--rounds K]
       limitsim scale --mesh [flags]   (the full mesh's study, 8 to 128 nodes: --mesh -h)

Measures what one node costs as the cluster grows from 8 to 1,000 nodes,
on limiterd's real counter, limiter, decision layer and engine.Engine
(clustersim.DefaultConfig: limiterd's defaults, the coordinator on), on
the simulated network (internal/clustersim): messages in their real
encoded bytes, no latency unless --latency, nothing lost unless cut.

For each cluster size N and scenario: R checks a second on each node
(request i at floor(i*1000/(R*N)) ms on node i mod N, round robin, as
behind a load balancer, or on a node drawn at random with --spread
random), each for a key drawn among K x N keys (HS1's
200,000 per 8 nodes) by Zipf popularity (rank k with weight (1+k)^-S,
seeded), under the one rule of HS3 (600 per 60 s, 12 slices), for S model
seconds. In the fallback scenario node --cut-node (0) goes silent from
--cut-at for --cut-for, as a node that dies and comes back: cut off both
ways, its requests going to the others, which fail its keys over. In the partition
scenario (not run by default) it is cut off the same way but still takes
its share of the requests and decides them alone, by the budget.
--sync, --delivery-grace, --tolerance, --lease-share and --lease-time
change every node's sync interval, delivery grace, tolerance and leases,
to see what they would buy (the network wait at HS2, for one); the
derived bound follows them.

It prints, per N and scenario (--json: one object a line, the fields in
brackets): sync bytes and messages sent per node and model second, every
engine message, coordination included (sync_bytes_per_node_s,
sync_msgs_per_node_s), the engine's CPU time per check: Tick, Receive and
the asks (engine_ns_per_check), the same for node N-1 replayed on its
own after the run (engine_ns_per_check_alone, --alone), the live heap of
the simulation per node (heap_bytes_per_node), the share of checks that asked a coordinator on
another node (network_wait_share; in a run longer than a window, also over
the checks after the first window: network_wait_share_after_window), the same
by the demand of the checks' keys, their checks per limit's worth of the run,
from within the limit (under 0.9) to ten times it and more, each class's keys,
checks and checks that waited (network_wait_by_demand: printed as a second
table), the share of those asks that the
coordinator granted (ask_granted_share), the most admitted for one key in any
window over the limit (worst_ratio) and the false rejections
(false_rejections). The hottest keys are judged exactly; any rejection of
another key counts as false. Heap and times depend on the machine.

All N nodes run in this one process, so each node's state is out of the
caches whenever it runs again, and more so the larger N: engine time per
check grows with N even where a node's work does not. --alone writes
everything node N-1 takes in to a temporary file as the run goes, then
runs it again on that node alone, checking every decision against the
run's, and times its engine as a node on a machine of its own would.
With --records DIR the records are kept; --replay DIR replays them again,
one after the other for --rounds rounds, so that their ratios come from
one interleaved run (a record holds the node's whole load; its name,
SCENARIO-N.rec, gives the cluster's size).

On this 2-core machine 60 s of model time took 8 s at 8 nodes, 4 min at
64 and 24 min at 256 (11.8 GB); at 1,000 nodes 5 s took 10 min (10 GB).
Up to 24 nodes the engine sends every change to every peer, beyond that
HS3's rule goes to its coordinators (docs/scaling.md).

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if !(seconds > 0 && seconds <= 3600) {
		return usageError(fs, stderr, "--seconds must be above 0 and at most 3600, got %v", seconds)
	}
	if replayDir != "" {
		if rounds < 1 || rounds > 100 {
			return usageError(fs, stderr, "--rounds must be between 1 and 100, got %d", rounds)
		}
		if err := replayRecords(stdout, cfg, replayDir, rounds); err != nil {
			fmt.Fprintf(stderr, "limitsim scale: %v\n", err)
			return exitRuntime
		}
		return 0
	}
	if cfg.Records != "" && !cfg.Alone {
		return usageError(fs, stderr, "--records needs --alone")
	}
	if cfg.Records != "" {
		// Made now, not found missing after a run's setup (an hour at
		// 1,000 nodes).
		if err := os.MkdirAll(cfg.Records, 0o755); err != nil {
			fmt.Fprintf(stderr, "limitsim scale: --records: %v\n", err)
			return exitRuntime
		}
	}
	cfg.Nodes, cfg.Scenarios = nodes, scenarios
	cfg.Duration = time.Duration(math.Round(seconds*1000)) * time.Millisecond
	if err := cfg.Validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	var rows []nodecost.Row
	var err error
	if from != "" {
		rows, err = readRows(from)
	} else {
		stop, perr := cpuprofile.Start(cpuProfile)
		if perr != nil {
			return usageError(fs, stderr, "--cpuprofile: %v", perr)
		}
		defer stop()
		// Progress goes to standard error: a run takes minutes.
		rows, err = nodecost.Run(cfg, func(r nodecost.Row) {
			fmt.Fprintf(stderr, "limitsim scale: %d nodes, %s, done in %.1f s\n", r.Nodes, r.Scenario, r.WallS)
		})
	}
	if err == nil && svgOut != "" {
		err = writeCharts(svgOut, rows)
	}
	if err == nil {
		if asJSON {
			err = nodecost.WriteJSON(stdout, rows)
		} else {
			err = nodecost.WriteTable(stdout, cfg, rows)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim scale: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// readRows reads --from's file.
func readRows(path string) ([]nodecost.Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return nodecost.ReadJSON(f)
}

// replayRecords replays every record in dir rounds times, interleaved,
// and prints each one's engine ns per check alone, round by round, and
// their median.
func replayRecords(w io.Writer, cfg nodecost.Config, dir string, rounds int) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.rec"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("no record (*.rec) in %s", dir)
	}
	// Smallest clusters first, then by scenario.
	type record struct {
		path     string
		scenario nodecost.Scenario
		n        int
		ns       []float64
	}
	recs := make([]record, len(paths))
	for i, p := range paths {
		sc, n, err := nodecost.ParseRecordName(filepath.Base(p))
		if err != nil {
			return err
		}
		recs[i] = record{path: p, scenario: sc, n: n}
	}
	slices.SortFunc(recs, func(a, b record) int { return cmp.Or(cmp.Compare(a.n, b.n), cmp.Compare(a.scenario, b.scenario)) })
	for range rounds {
		for i := range recs {
			ns, err := nodecost.ReplayRecord(cfg, recs[i].n, recs[i].path)
			if err != nil {
				return fmt.Errorf("%s: %w", recs[i].path, err)
			}
			recs[i].ns = append(recs[i].ns, ns)
		}
	}
	fmt.Fprintf(w, "engine ns per check of node N-1 replayed alone, %d rounds interleaved, and the median\n", rounds)
	for _, r := range recs {
		fmt.Fprintf(w, "%-9s %5d", r.scenario, r.n)
		for _, ns := range r.ns {
			fmt.Fprintf(w, " %8.0f", ns)
		}
		med := slices.Clone(r.ns)
		slices.Sort(med)
		fmt.Fprintf(w, "   median %8.0f\n", med[len(med)/2])
	}
	return nil
}

// writeCharts writes one chart per scenario of rows (nodecost.Chart) to
// path, or, with several scenarios, to path with the scenario's name
// before its extension.
func writeCharts(path string, rows []nodecost.Row) error {
	var scenarios []nodecost.Scenario
	for _, r := range rows {
		if !slices.Contains(scenarios, r.Scenario) {
			scenarios = append(scenarios, r.Scenario)
		}
	}
	for _, sc := range scenarios {
		svg := nodecost.Chart(rows, sc)
		if svg == nil {
			return fmt.Errorf("--svg: the %s scenario has fewer than two cluster sizes", sc)
		}
		out := path
		if len(scenarios) > 1 {
			ext := filepath.Ext(path)
			out = strings.TrimSuffix(path, ext) + "-" + string(sc) + ext
		}
		if err := os.WriteFile(out, svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scenarioList is the --scenarios flag: names separated by commas.
type scenarioList []nodecost.Scenario

func (l *scenarioList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, sc := range *l {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}

func (l *scenarioList) Set(v string) error {
	var out []nodecost.Scenario
	for f := range strings.SplitSeq(v, ",") {
		out = append(out, nodecost.Scenario(strings.TrimSpace(f)))
	}
	*l = out
	return nil
}

// nodeList is the --nodes flag: cluster sizes separated by commas.
type nodeList []int

func (l *nodeList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *nodeList) Set(v string) error {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a cluster size", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
