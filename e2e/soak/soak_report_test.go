package soak

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/oracle"
	"github.com/limiterd/limiterd/internal/svgchart"
)

// The soak's report: the table rows per minute, the verdict, the chart
// and the section of docs/faults.md.

// soakRow is one minute of the table and the chart.
type soakRow struct {
	minute                   int // from 1
	checks, unsent           int
	restart                  string
	rssMax, rssAvg, rssAll   float64 // MB: the largest node, the mean, all nodes
	goroutinesMax            int
	goroutinesAvg            float64
	goroutinesAll            int
	fdsMax                   int
	fdsAvg                   float64
	fdsAll                   int
	p50ms, p99ms             float64
	worst, worstCompliant    float64 // most admitted in a window ending this minute / limit
	falseRejections          int     // of the compliant keys, denied this minute
	fiveXX, errs, lost, miss int     // miss: nodes not sampled
}

// rows judges the decision logs with internal/oracle and puts each
// minute's figures together.
func (s *soak) rows(samples [][]soakNodeSample, restarts []soakRestart) []soakRow {
	for _, j := range s.judges {
		slices.Sort(j.admitted)
		slices.Sort(j.rejected)
	}
	rows := make([]soakRow, len(s.minutes))
	for m, ml := range s.minutes {
		r := &rows[m]
		r.minute = m + 1
		r.checks, r.unsent, r.fiveXX, r.errs, r.lost = ml.checks, ml.unsent, ml.fiveXX, ml.errs, ml.lost
		r.p50ms, r.p99ms = ml.p50.Seconds()*1000, ml.p99.Seconds()*1000
		r.restart = restarts[m].signal + " " + restarts[m].node
		var ok int
		for _, x := range samples[m] {
			if x.err != nil {
				r.miss++
				continue
			}
			ok++
			r.rssMax = max(r.rssMax, x.rssMB)
			r.rssAll += x.rssMB
			r.goroutinesMax = max(r.goroutinesMax, x.goroutines)
			r.goroutinesAll += x.goroutines
			r.fdsMax = max(r.fdsMax, x.fds)
			r.fdsAll += x.fds
		}
		if ok > 0 {
			r.rssAvg = r.rssAll / float64(ok)
			r.goroutinesAvg = float64(r.goroutinesAll) / float64(ok)
			r.fdsAvg = float64(r.fdsAll) / float64(ok)
		}
		// The windows that end in this minute start in the one before: the
		// admissions of both, every window-long interval among them.
		from, to := time.Duration(m-1)*soakMinute, time.Duration(m+1)*soakMinute
		for _, j := range s.judges {
			most, _ := oracle.MaxInWindow(soakBetween(j.admitted, from, to), nil, soakWindow)
			ratio := float64(most) / soakLimit
			if j.compliant {
				r.worstCompliant = max(r.worstCompliant, ratio)
				denied := soakBetween(j.rejected, from+soakMinute, to)
				r.falseRejections += oracle.FalseRejections(j.admitted, denied, soakWindow, soakLimit)
			} else {
				r.worst = max(r.worst, ratio)
			}
		}
	}
	for _, j := range s.judges {
		most, _ := oracle.MaxInWindow(j.admitted, nil, soakWindow)
		s.t.Logf("%s (%.1f/s): %d admitted, %d denied, worst window %.3f x the limit, %d false rejections (oracle)",
			j.key, j.rate, len(j.admitted), len(j.rejected), float64(most)/soakLimit, oracle.FalseRejections(j.admitted, j.rejected, soakWindow, soakLimit))
	}
	return rows
}

// soakBetween is the part of sorted instants in [from, to).
func soakBetween(at []time.Duration, from, to time.Duration) []time.Duration {
	lo, _ := slices.BinarySearch(at, from)
	hi, _ := slices.BinarySearch(at, to)
	return at[lo:hi]
}

// soakTrend compares a figure's mean over the last 5 minutes with its
// mean over minutes 2-6 (the first is the warm-up: keys arriving, pools
// growing): the ratio, and whether the two spans are apart (10 minutes
// or more), without which no verdict is drawn.
func soakTrend(rows []soakRow, f func(soakRow) float64) (early, late float64, apart bool) {
	mean := func(rs []soakRow) float64 {
		var sum float64
		for _, r := range rs {
			sum += f(r)
		}
		return sum / float64(len(rs))
	}
	n := len(rows)
	early = mean(rows[min(1, n-1):min(6, n)])
	late = mean(rows[max(0, n-5):])
	return early, late, n >= 10
}

// soakGrowth is how much more late is than early, as a fraction.
func soakGrowth(early, late float64) float64 {
	if early <= 0 {
		return 0
	}
	return late/early - 1
}

// soakVerdict says, from the data, whether what grows on a leak is flat:
// a figure is growing when its mean over the last 5 minutes is more than
// 10 % above its mean over minutes 2-6.
func soakVerdict(rows []soakRow) string {
	figures := []struct {
		name string
		unit string
		f    func(soakRow) float64
	}{
		{"RSS of the largest node", " MB", func(r soakRow) float64 { return r.rssMax }},
		{"goroutines (most on a node)", "", func(r soakRow) float64 { return float64(r.goroutinesMax) }},
		{"open descriptors (most on a node)", "", func(r soakRow) float64 { return float64(r.fdsMax) }},
		{"p99", " ms", func(r soakRow) float64 { return r.p99ms }},
	}
	var growing, parts []string
	apart := false
	for _, fg := range figures {
		early, late, a := soakTrend(rows, fg.f)
		apart = a
		g := soakGrowth(early, late)
		parts = append(parts, fmt.Sprintf("%s %.1f → %.1f%s (%+.0f %%)", fg.name, early, late, fg.unit, g*100))
		if g > 0.10 {
			growing = append(growing, fg.name)
		}
	}
	cmp := strings.Join(parts, "; ")
	switch {
	case !apart:
		return fmt.Sprintf("Verdict: too short to tell (%d minutes; the verdict compares minutes 2-6 with the last 5, which takes 10). Minutes 2-6 against the last 5: %s.", len(rows), cmp)
	case len(growing) > 0:
		return fmt.Sprintf("Verdict: **growing** (%s more than 10 %% above minutes 2-6 over the last 5 minutes). Minutes 2-6 against the last 5: %s.", strings.Join(growing, ", "), cmp)
	default:
		return fmt.Sprintf("Verdict: **flat** (nothing more than 10 %% above minutes 2-6 over the last 5 minutes). Minutes 2-6 against the last 5: %s.", cmp)
	}
}

// Colours of the soak chart (the Okabe-Ito palette, as limitsim's).
const (
	soakColMax   = "#D55E00" // vermillion
	soakColAvg   = "#0072B2" // blue
	soakColOther = "#009E73" // bluish green
	soakColLimit = "#555555"
)

// soakChart draws the minutes: one small chart per figure, stacked.
func soakChart(rows []soakRow, rate int, d time.Duration) []byte {
	n := len(rows)
	x := svgchart.Axis{Label: "minute", Min: 1, Max: float64(n)}
	step := 1
	for _, st := range []int{1, 2, 5, 10, 15, 30, 60} {
		if step = st; n/st <= 12 {
			break
		}
	}
	for m := step; m <= n; m += step {
		x.Ticks = append(x.Ticks, svgchart.Tick{V: float64(m), Label: strconv.Itoa(m)})
	}
	if step > 1 {
		x.Ticks = append([]svgchart.Tick{{V: 1, Label: "1"}}, x.Ticks...)
	}
	line := func(name, color string, dash string, f func(soakRow) float64) svgchart.Series {
		s := svgchart.Series{Name: name, Color: color, Width: 2, Dash: dash, Markers: n <= 40}
		for _, r := range rows {
			s.Points = append(s.Points, svgchart.Point{X: float64(r.minute), Y: f(r)})
		}
		return s
	}
	chart := func(title, subtitle, ylabel string, lo float64, series ...svgchart.Series) svgchart.Chart {
		top := 0.0
		for _, s := range series {
			for _, p := range s.Points {
				top = max(top, p.Y)
			}
		}
		return svgchart.Chart{
			Title: title, Subtitle: subtitle, Height: 300, X: x,
			Y:      svgchart.Axis{Label: ylabel, Min: lo, Max: soakCeil(max(top*1.15, 1))},
			Series: series,
		}
	}
	setup := fmt.Sprintf("%d nodes, %d checks/s, %s, one node restarted every minute (SIGTERM and SIGKILL in turn); sampled at each minute's end.", soakNodes, rate, soakDurationArg(d))
	ratio := chart("Worst window of the judge keys", "Most admitted in any 60 s window ending in the minute ÷ the limit (internal/oracle), over the judge keys.", "÷ limit", 0,
		line("abusive keys (2×, 5×, 20× the limit)", soakColMax, "", func(r soakRow) float64 { return r.worst }),
		line("compliant keys (0.5×, 0.8×, 0.9×)", soakColOther, "7 4", func(r soakRow) float64 { return r.worstCompliant }))
	ratio.Y.Max = max(ratio.Y.Max, 1.3)
	ratio.HLines = []svgchart.HLine{
		{Y: 1, Label: "limit: 1.0", Color: soakColLimit, Dash: "8 5"},
		{Y: 1.1, Label: "NFR1 ceiling: 1.1", Color: soakColMax, Dash: "4 3"},
	}
	return svgchart.Stack("Soak: "+setup, "Per minute: resident memory, goroutines and open descriptors per node, client-side latency, and the judge keys' worst window.",
		chart("Resident memory per node (VmRSS)", setup, "MB", 0,
			line("largest node", soakColMax, "", func(r soakRow) float64 { return r.rssMax }),
			line("mean of the nodes", soakColAvg, "7 4", func(r soakRow) float64 { return r.rssAvg })),
		chart("Goroutines per node (go_goroutines)", "From each node's /metrics at the minute's end.", "goroutines", 0,
			line("most on a node", soakColMax, "", func(r soakRow) float64 { return float64(r.goroutinesMax) }),
			line("mean of the nodes", soakColAvg, "7 4", func(r soakRow) float64 { return r.goroutinesAvg })),
		chart("Open file descriptors per node (/proc/PID/fd)", "Sockets (clients' keep-alive connections, peers' streams) and files, at the minute's end.", "descriptors", 0,
			line("most on a node", soakColMax, "", func(r soakRow) float64 { return float64(r.fdsMax) }),
			line("mean of the nodes", soakColAvg, "7 4", func(r soakRow) float64 { return r.fdsAvg })),
		chart("Latency of the minute's checks, client-side", "From sending a check to reading its answer, every check sent in the minute.", "ms", 0,
			line("p99", soakColMax, "", func(r soakRow) float64 { return r.p99ms }),
			line("p50", soakColAvg, "7 4", func(r soakRow) float64 { return r.p50ms })),
		ratio,
	)
}

// soakCeil rounds v up to 1, 2 or 5 times a power of ten, an axis's top.
func soakCeil(v float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= v {
			return m * mag
		}
	}
	return 10 * mag
}

// soakMachine describes the machine: the soak's latencies are this
// machine's, shared with whatever else ran.
func soakMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d cores (%s), %s, %s/%s, load average %s at the start", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}

// Markers of the Soak section in docs/faults.md: the soak rewrites what
// lies between them and nothing else of the file.
const (
	soakBegin = "<!-- soak:begin -->"
	soakEnd   = "<!-- soak:end -->"
)

// soakSection is the Soak section of docs/faults.md, markers included.
func soakSection(rows []soakRow, restarts []soakRestart, verdict string, rate int, d time.Duration, machine string) string {
	var b strings.Builder
	cmd := "make soak DURATION=" + soakDurationArg(d)
	if rate != soakDefaultRate {
		cmd += " RATE=" + strconv.Itoa(rate)
	}
	fmt.Fprintf(&b, "%s\n## Soak\n\n", soakBegin)
	fmt.Fprintf(&b, "`make soak` (not in CI; `DURATION`, default 30m, and `RATE`, default %d checks/s) runs `TestSoak` in e2e/soak/soak_test.go: "+
		"%d limiterd processes on 127.0.0.1 at half the HS2 rate this machine sustains (BENCHMARKS.md: 12,000 checks/s with p99 under 10 ms), "+
		"%d keys drawn by Zipf(s=%g) with HS2's rule (%d per %.0f s), spread at random over the nodes, and a node restarted every minute, "+
		"SIGTERM and SIGKILL in turn, round-robin, with the same name and ports (node-0, the seed, comes back joining the others). "+
		"Six judge keys keep their whole decision logs: three compliant (0.5, 0.8 and 0.9 × the limit's rate), three abusive (2, 5 and 20 ×). "+
		"The load is limitload's driver (internal/loadgen): it keeps %d connections to each node alive, sends each check at its instant or not at all when more than 1 s late, and measures its latency from writing it to reading its answer. "+
		"At each minute's end it reads every node's resident memory (VmRSS), goroutines (`go_goroutines`) and open descriptors (/proc/PID/fd).\n\n",
		soakDefaultRate, soakNodes, soakKeys, soakZipfS, soakLimit, soakWindow.Seconds(), soakConns)
	fmt.Fprintf(&b, "Last run: `%s`, %s, on %s. A node lives at most %d minutes (the round-robin restarts it), so a leak inside one process shows as a climb over its first %d minutes, then a sawtooth.\n\n",
		cmd, time.Now().UTC().Format("2006-01-02 15:04 UTC"), machine, soakNodes, soakNodes)
	b.WriteString("| minute | checks | unsent | restarted at :30 | RSS MB, largest node / all | goroutines, most / all | fds, most / all | p99 ms | worst window ÷ limit | false rejections | 5xx | errors | lost to the restart |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		miss := ""
		if r.miss > 0 {
			miss = fmt.Sprintf(" (%d nodes unread)", r.miss)
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %s | %.1f / %.0f%s | %d / %d | %d / %d | %.2f | %.3f | %d | %d | %d | %d |\n",
			r.minute, r.checks, r.unsent, r.restart, r.rssMax, r.rssAll, miss, r.goroutinesMax, r.goroutinesAll, r.fdsMax, r.fdsAll, r.p99ms, r.worst, r.falseRejections, r.fiveXX, r.errs, r.lost)
	}
	fmt.Fprintf(&b, "\n\"unsent\" are checks the generator did not send, being more than %v behind their instant (the machine did not carry the load); ", soakLate)
	b.WriteString("\"worst window\" is the most an abusive judge key had admitted in any 60 s window ending in the minute, by send instant, ÷ the limit (the compliant keys' are in the chart); \"false rejections\" are the compliant keys' denials while under the limit (internal/oracle); ")
	fmt.Fprintf(&b, "\"errors\" are checks to a node not being restarted that got no answer; \"lost to the restart\" are the checks the restarted node had in flight when it died. The restarts (exit code, lines the stopped process logged at `-log-level warn`, time from the signal to /readyz (a SIGTERM'd node is out of the load for %v before it), then until the restarted node saw all members alive):\n\n", soakDrain)
	for m, r := range restarts {
		fmt.Fprintf(&b, "- minute %d: %s\n", m+1, r)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%s\n\n![The soak, minute by minute](img/soak.svg)\n%s\n", verdict, soakEnd)
	return b.String()
}

// soakDurationArg writes d (whole minutes) as make soak's DURATION:
// "30m", "2h", "1h30m" rather than time's "30m0s".
func soakDurationArg(d time.Duration) string {
	s := strings.TrimSuffix(d.String(), "0s")
	if h, ok := strings.CutSuffix(s, "h0m"); ok {
		return h + "h"
	}
	return s
}

// soakWriteSection puts section in place of the soak markers' block of
// the file at path, or at its end if it has none; a missing file is
// created with a title. Other sections, above it, stay as they are.
func soakWriteSection(path, section string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err = []byte("# Faults\n"), nil
	}
	if err != nil {
		return fmt.Errorf("soak section: %w", err)
	}
	out, err := soakReplace(string(b), section)
	if err != nil {
		return fmt.Errorf("soak section of %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return fmt.Errorf("soak section: %w", err)
	}
	return nil
}

// soakReplace returns doc with its soak block replaced by section, or
// with section appended after a blank line if it has no block.
func soakReplace(doc, section string) (string, error) {
	i, j := strings.Index(doc, soakBegin), strings.Index(doc, soakEnd)
	switch {
	case i < 0 && j < 0:
		return strings.TrimRight(doc, "\n") + "\n\n" + section, nil
	case i < 0 || j < i || strings.Count(doc, soakBegin) > 1 || strings.Count(doc, soakEnd) > 1:
		return "", errors.New("the soak markers are unpaired, repeated or out of order")
	}
	end := j + len(soakEnd)
	if end < len(doc) && doc[end] == '\n' {
		end++
	}
	return doc[:i] + section + doc[end:], nil
}

// TestSoakReplace checks the rewrite of docs/faults.md's soak block: in
// place, the rest untouched, appended when absent, refused when broken.
func TestSoakReplace(t *testing.T) {
	sec := soakBegin + "\nnew\n" + soakEnd + "\n"
	for _, tt := range []struct{ doc, want string }{
		{"# Faults\n", "# Faults\n\n" + sec},
		{"# Faults\n\n## Other\n\ntext\n\n" + soakBegin + "\nold\nlines\n" + soakEnd + "\n", "# Faults\n\n## Other\n\ntext\n\n" + sec},
		{"# Faults\n\n" + soakBegin + "\nold\n" + soakEnd + "\n\n## After\n", "# Faults\n\n" + sec + "\n## After\n"},
		{"# Faults\n\n" + soakBegin + "\nold\n" + soakEnd, "# Faults\n\n" + sec},
	} {
		got, err := soakReplace(tt.doc, sec)
		if err != nil || got != tt.want {
			t.Errorf("soakReplace(%q) = %q, %v; want %q", tt.doc, got, err, tt.want)
		}
	}
	for _, bad := range []string{soakBegin + "\n", soakEnd + "\n" + soakBegin + "\n", soakBegin + soakEnd + soakBegin + soakEnd} {
		if _, err := soakReplace(bad, sec); err == nil {
			t.Errorf("soakReplace(%q) succeeded", bad)
		}
	}
	log := `time=1 level=WARN msg="a \"quoted\" one" node=a
time=2 level=WARN msg="other" node=a
time=3 level=WARN msg="a \"quoted\" one" node=b
no msg here`
	if got, want := soakLogSummary(log), `2× "a \"quoted\" one", 1× "no msg here", 1× "other"`; got != want {
		t.Errorf("soakLogSummary = %s, want %s", got, want)
	}
	if got := []string{soakDurationArg(30 * time.Minute), soakDurationArg(2 * time.Hour), soakDurationArg(90 * time.Minute)}; !slices.Equal(got, []string{"30m", "2h", "1h30m"}) {
		t.Errorf("durations written %q", got)
	}
}
