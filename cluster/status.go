package cluster

import (
	"cmp"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// Status is a node's view of the cluster, as GET /cluster shows it.
type Status struct {
	// Self is this node's name.
	Self string `json:"self"`
	// Nodes is how many members are alive or suspect, this node included:
	// the number the counter shares each limit's tolerance among.
	Nodes int `json:"nodes"`
	// Members lists every member seen, this node included, by name. Dead
	// and departed members stay listed for an hour.
	Members []Member `json:"members"`
}

// Member is one member's last known state.
type Member struct {
	Name string `json:"name"`
	// Addr is the member's memberlist HOST:PORT.
	Addr string `json:"addr"`
	// HTTP is the member's HTTP API address, if it published one.
	HTTP string `json:"http,omitempty"`
	// State is alive; suspect: memberlist still holds it alive, but no
	// message (sync or heartbeat, sent every AntiEntropyInterval) arrived
	// from it for three heartbeats, so it is still sent to and counted as
	// a node, but likely cut off or overloaded; dead: memberlist declared
	// it failed; left: it shut down gracefully.
	State string `json:"state"`
	// LastDeltaAgeMs is how long ago the last sync message from the member
	// arrived; null for this node and for a member never heard from.
	LastDeltaAgeMs *int64 `json:"last_delta_age_ms"`
	// ClockOffsetMs is the member's clock minus ours as of its last message
	// (one-way network delay included); null as above.
	ClockOffsetMs *int64 `json:"clock_offset_ms"`
}

// Status returns the node's current view of the cluster. Safe to call at
// any time, concurrently.
func (n *Node) Status() Status { return n.status(n.now()) }

// Members returns Status().Members.
func (n *Node) Members() []Member { return n.Status().Members }

func (n *Node) status(now time.Time) Status {
	peers := n.engine.Peers()
	st := Status{Self: n.cfg.NodeName}
	n.mu.Lock()
	for name, m := range n.members {
		state := m.state
		mb := Member{Name: name, Addr: m.addr, HTTP: m.http}
		if p, ok := peers[name]; ok && name != n.cfg.NodeName && !p.LastMessage.IsZero() {
			age := now.Sub(p.LastMessage).Milliseconds()
			off := p.Offset.Milliseconds()
			mb.LastDeltaAgeMs, mb.ClockOffsetMs = &age, &off
		}
		if state == memberlist.StateAlive && name != n.cfg.NodeName && n.engine.Suspect(now, name, m.since) {
			// memberlist keeps suspicion to itself; what we can see is a peer
			// whose heartbeats stopped arriving.
			state = memberlist.StateSuspect
		}
		if state == memberlist.StateAlive || state == memberlist.StateSuspect {
			st.Nodes++
		}
		mb.State = stateName(state)
		st.Members = append(st.Members, mb)
	}
	n.mu.Unlock()
	slices.SortFunc(st.Members, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return st
}
