package netlab

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// The faults are rules of one nftables table, inet netlab, in each node's
// namespace: its input chain drops what reaches the node from the sources
// a fault names. Only node addresses are ever named, so the hub (the
// test's clients) always gets through. Each call adds to the faults in
// force; Heal removes them all.

// Partition cuts the network between the groups (node indexes): no packet
// from a node of one group reaches a node of another. Nodes in no group
// are left alone.
func (l *Lab) Partition(groups ...[]int) error {
	rules := map[int][]string{}
	for gi, g := range groups {
		var others []string
		for gj, h := range groups {
			if gj != gi {
				for _, j := range h {
					others = append(others, l.Addr(j).String())
				}
			}
		}
		if len(others) == 0 {
			continue
		}
		for _, i := range g {
			rules[i] = append(rules[i], "ip saddr { "+strings.Join(others, ", ")+" } drop")
		}
	}
	return l.apply(rules)
}

// DropOneWay drops every packet from node from to node to, and none the
// other way: to does not hear from, from hears to.
func (l *Lab) DropOneWay(from, to int) error {
	return l.apply(map[int][]string{to: {"ip saddr " + l.Addr(from).String() + " drop"}})
}

// Loss drops percent % of the packets between any two nodes, each packet
// on its own (nftables' numgen random), at the receiver.
func (l *Lab) Loss(percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("netlab: loss of %d %%, want 0 to 100", percent)
	}
	var all []string
	for i := range l.nodes {
		all = append(all, l.Addr(i).String())
	}
	if percent == 0 {
		return nil
	}
	rule := fmt.Sprintf("ip saddr { %s } numgen random mod 100 < %d drop", strings.Join(all, ", "), percent)
	if percent == 100 { // numgen's values are 0-99: < 100 is refused
		rule = fmt.Sprintf("ip saddr { %s } drop", strings.Join(all, ", "))
	}
	rules := map[int][]string{}
	for i := range l.nodes {
		rules[i] = []string{rule}
	}
	return l.apply(rules)
}

// Heal removes every fault: all packets flow again.
func (l *Lab) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.nodes {
		if err := l.nft(i, table+"flush chain inet netlab input\n"); err != nil {
			return err
		}
	}
	return nil
}

// Drops returns how many packets the fault rules in force at node i have
// dropped there (Heal resets it), read from the rules' counters.
func (l *Lab) Drops(i int) (int64, error) {
	out, err := exec.Command(l.cfg.IP, "netns", "exec", l.nodes[i], l.cfg.NFT, "list", "chain", "inet", "netlab", "input").CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("No such file")) {
			return 0, nil // no fault was ever made here
		}
		return 0, fmt.Errorf("netlab: nft list: %v: %s", err, bytes.TrimSpace(out))
	}
	var n int64
	for _, f := range strings.Split(string(out), "packets ")[1:] {
		var p int64
		fmt.Sscan(f, &p)
		n += p
	}
	return n, nil
}

// table makes the table and its chain if they are not there yet (an add
// of what exists is no error in nftables).
const table = `add table inet netlab
add chain inet netlab input { type filter hook input priority 0; policy accept; }
`

// apply adds rules (nftables rule bodies, a counter is added to each) to
// the input chain of each node given, each node's rules in one
// transaction.
func (l *Lab) apply(rules map[int][]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, rs := range rules {
		if i < 0 || i >= len(l.nodes) {
			return fmt.Errorf("netlab: no node %d (the lab has %d)", i, len(l.nodes))
		}
		var b strings.Builder
		b.WriteString(table)
		for _, r := range rs {
			r = strings.Replace(r, " drop", " counter drop", 1)
			fmt.Fprintf(&b, "add rule inet netlab input %s\n", r)
		}
		if err := l.nft(i, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// nft runs script with nft -f in node i's namespace.
func (l *Lab) nft(i int, script string) error {
	if l.cfg.NFT == "" {
		return fmt.Errorf("netlab: no nft command configured")
	}
	cmd := exec.Command(l.cfg.IP, "netns", "exec", l.nodes[i], l.cfg.NFT, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netlab: nft in %s: %v: %s\n%s", l.nodes[i], err, bytes.TrimSpace(out), script)
	}
	return nil
}
