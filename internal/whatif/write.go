package whatif

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// Write writes the what-if report: a line on the log and the cluster,
// a table with a row per rule in file order, a row for keys no rule governs
// and a total, then for each rule that rejected anything the keys it
// rejected most (at most top). The layout is part of the command's
// interface (see doc.go).
func Write(w io.Writer, rep Report) error {
	bw := bufio.NewWriter(w)
	cfg := rep.cfg
	keys := 0
	for _, rt := range rep.rules {
		keys += len(rt.keys) // a key is decided by one rule: rows do not share keys
	}
	fmt.Fprintf(bw, "what-if replay: %d requests, %d keys", rep.requests, keys)
	if rep.requests > 0 {
		fmt.Fprintf(bw, ", %s to %s (%v)", rep.firstTime, rep.lastTime, time.Duration(rep.durationMs)*time.Millisecond)
	}
	fmt.Fprintln(bw)
	if sc := cfg.Sim; sc.Nodes == 0 {
		fmt.Fprintln(bw, "on one node")
	} else {
		budget := "no budget"
		if sc.Budget {
			budget = fmt.Sprintf("budget floor %g", sc.Floor)
		}
		if sc.Dup {
			budget += ", every message twice"
		}
		fmt.Fprintf(bw, "on %d simulated nodes (sync %d ms, latency %d ms, skew %d ms, stagger %d ms, %s);\n",
			sc.Nodes, sc.Sync.Milliseconds(), sc.Latency.Milliseconds(), sc.Skew.Milliseconds(), sc.Stagger.Milliseconds(), budget)
		fmt.Fprintf(bw, "a line without NODE goes to the node the seed's LCG (seed %d) draws\n", cfg.Seed)
	}
	fmt.Fprintln(bw)

	tab := table{header: []string{"rule", "mode", "match", "limits", "requests", "allowed", "rejected", "would reject", "keys", "keys rejected"},
		right: []bool{false, false, false, false, true, true, true, true, true, true}}
	var tot ruleTally
	totKeys, totKeysRejected := 0, 0
	for _, rt := range rep.rules {
		tot.requests += rt.requests
		tot.allowed += rt.allowed
		tot.rejected += rt.rejected
		tot.wouldReject += rt.wouldReject
		tot.untracked += rt.untracked
		totKeys += len(rt.keys)
		totKeysRejected += rt.keysRejected()
		if rt.rule == nil {
			tab.add("(no rule)", "unlimited", "-", "-", itoa(rt.requests), itoa(rt.allowed), "-", "-", itoa(len(rt.keys)), "-")
			continue
		}
		mode, rejected, would := "enforce", itoa(rt.rejected), "-"
		if rt.rule.Shadow {
			mode, rejected, would = "shadow", "-", itoa(rt.wouldReject)
		}
		match := rt.rule.Match
		if match == "" {
			match = "(default)"
		}
		tab.add(rt.rule.Name, mode, match, limitsText(rt.rule.Limits), itoa(rt.requests), itoa(rt.allowed),
			rejected, would, itoa(len(rt.keys)), itoa(rt.keysRejected()))
	}
	tab.add("total", "", "", "", itoa(tot.requests), itoa(tot.allowed), itoa(tot.rejected), itoa(tot.wouldReject), itoa(totKeys), itoa(totKeysRejected))
	tab.write(bw)
	if tot.untracked > 0 {
		fmt.Fprintf(bw, "untracked: %d requests allowed uncounted because the counter held its maximum of keys\n", tot.untracked)
	}

	if tot.rejections() == 0 {
		fmt.Fprintln(bw, "\nno rule rejected or would have rejected any request")
	}
	for _, rt := range rep.rules {
		if rt.rule == nil || rt.rejections() == 0 {
			continue
		}
		writeRuleKeys(bw, rt, cfg.Top)
	}
	return bw.Flush()
}

// writeRuleKeys writes one rule's rejections: a line with the totals (and,
// for a rule with several limits, how often each limit had no room), then
// the top keys by rejections, ties by key.
func writeRuleKeys(bw *bufio.Writer, rt *ruleTally, top int) {
	r := rt.rule
	verb, col, first := "rejected", "rejected", "first rejection"
	if r.Shadow {
		verb, col, first = "would have rejected", "would reject", "first would-be rejection"
	}
	fmt.Fprintf(bw, "\nrule %s", r.Name)
	if r.Shadow {
		fmt.Fprint(bw, " (shadow)")
	}
	fmt.Fprintf(bw, " %s %d of %d requests (%s), from %d of %d keys", verb, rt.rejections(), rt.requests,
		percent(rt.rejections(), rt.requests), rt.keysRejected(), len(rt.keys))
	if len(r.Limits) > 1 {
		parts := make([]string, len(r.Limits))
		for i, l := range r.Limits {
			parts[i] = fmt.Sprintf("%s %d", l.Policy, rt.byLimit[i])
		}
		fmt.Fprintf(bw, "; limits without room: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(bw)
	if top == 0 {
		return
	}
	type kv struct {
		key string
		k   *whatifKey
	}
	var ks []kv
	for key, k := range rt.keys {
		if k.rejected > 0 {
			ks = append(ks, kv{key, k})
		}
	}
	slices.SortFunc(ks, func(a, b kv) int {
		return cmp.Or(cmp.Compare(b.k.rejected, a.k.rejected), cmp.Compare(a.key, b.key))
	})
	if len(ks) > top {
		fmt.Fprintf(bw, "top %d of %d keys by rejections:\n", top, len(ks))
		ks = ks[:top]
	}
	tab := table{header: []string{"key", "requests", col, "share", first}, right: []bool{false, true, true, true, false}}
	for _, e := range ks {
		tab.add(e.key, itoa(e.k.requests), itoa(e.k.rejected), percent(e.k.rejected, e.k.requests), e.k.first)
	}
	tab.write(bw)
}

// limitsText writes a rule's limits as "600/60s" or "10/1s, 600/60s".
func limitsText(ls []limiter.LimitSpec) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		w := strconv.FormatInt(l.Window.Milliseconds(), 10) + "ms"
		if l.Window%time.Second == 0 {
			w = strconv.FormatInt(int64(l.Window/time.Second), 10) + "s"
		}
		parts[i] = fmt.Sprintf("%d/%s", l.Limit, w)
	}
	return strings.Join(parts, ", ")
}

// percent writes n/of as a percentage with one decimal ("-" for of = 0).
func percent(n, of int) string {
	if of == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 1, 64) + "%"
}

func itoa(n int) string { return strconv.Itoa(n) }

// table is a text table with columns two spaces apart, each left- or
// right-aligned; widths count runes, which lines up keys of any script in
// a monospace font as long as they are not double-width.
type table struct {
	header []string
	right  []bool
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(bw *bufio.Writer) {
	width := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range append([][]string{t.header}, t.rows...) {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if t.right[i] {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(bw, strings.TrimRight(b.String(), " "))
	}
}
