package cluster

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
)

// strangers defers the warning about messages dropped because their
// sender is no member here, on a cluster without a gossip key (where
// anyone who can reach the port may send). Most such messages are a join
// race, not a stranger: a starting node greets its peers as soon as it has
// joined one seed, and its hello reaches the others before memberlist's
// gossip of the new member does. Warned at once, every cluster start
// logged a warning per node pair, which teaches operators to ignore the
// one that matters. So a dropped sender's name is noted, and only if it is
// still no member strangerGrace later is the warning written, with what
// was dropped; a sender that keeps sending is warned about again at most
// every strangerRewarn. At most maxStrangers names are kept (a forger
// can make up any number of names); the messages of senders past that
// are counted and reported with the named ones, and forgotten when every
// named one turned out to be joining (a large cluster starting).
//
// Safe for concurrent use: note is called from the delivering goroutines,
// due from the sync loop.
type strangers struct {
	mu       sync.Mutex
	names    map[string]*stranger
	overflow int // messages dropped from senders past maxStrangers since the last report
}

// stranger is what is known of one sender dropped as a non-member.
type stranger struct {
	since   time.Time // first dropped, or last warned about
	dropped int       // messages dropped since then
	warned  bool      // a warning named it already
}

const (
	// maxStrangers bounds the names kept.
	maxStrangers = 16
	// strangerGrace is how long a sender may be unknown before it is
	// warned about: memberlist's gossip tells every member of a new one
	// within a second or two on a LAN.
	strangerGrace = 5 * time.Second
	// strangerRewarn is the least time between two warnings about one
	// sender that keeps sending.
	strangerRewarn = time.Minute
)

// strangerReport is one warning due: a sender, the messages of it dropped
// and over how long.
type strangerReport struct {
	name    string
	dropped int
	over    time.Duration
}

// note records a message from name dropped at now. It keeps a copy of
// name, which may alias a datagram's buffer.
func (s *strangers) note(name string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.names[name]; st != nil {
		st.dropped++
		return
	}
	if len(s.names) >= maxStrangers {
		s.overflow++
		return
	}
	if s.names == nil {
		s.names = make(map[string]*stranger)
	}
	s.names[strings.Clone(name)] = &stranger{since: now, dropped: 1}
}

// due returns the warnings due at now and, with them, the messages
// dropped from senders that did not fit since the last report. A sender
// that has become a member is forgotten silently: it was joining. One
// already warned about is warned about again after strangerRewarn if it
// sent more since, and forgotten if it did not. Once no named sender is
// left, the count of the unnamed ones is dropped too: they were most
// likely joining with the named ones.
func (s *strangers) due(now time.Time, member func(name string) bool) (reports []strangerReport, overflow int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, st := range s.names {
		wait := strangerGrace
		if st.warned {
			wait = strangerRewarn
		}
		switch {
		case member(name):
			delete(s.names, name)
		case now.Sub(st.since) < wait:
		case st.dropped == 0:
			delete(s.names, name)
		default:
			reports = append(reports, strangerReport{name: name, dropped: st.dropped, over: now.Sub(st.since)})
			st.since, st.dropped, st.warned = now, 0, true
		}
	}
	slices.SortFunc(reports, func(a, b strangerReport) int { return cmp.Compare(a.name, b.name) })
	switch {
	case len(reports) > 0:
		overflow, s.overflow = s.overflow, 0
	case len(s.names) == 0:
		s.overflow = 0
	}
	return reports, overflow
}

// warnStrangers writes the warnings due at now (strangers).
func (n *Node) warnStrangers(now time.Time) {
	reports, overflow := n.strangers.due(now, n.isMember)
	for _, r := range reports {
		n.log.Warn("dropped cluster messages from a sender that is no member of this cluster (set -gossip-key to keep others out)",
			"sender", r.name, "messages", r.dropped, "over", r.over.Round(time.Second))
	}
	if overflow > 0 {
		n.log.Warn("dropped cluster messages from more senders that are no members of this cluster (set -gossip-key to keep others out)",
			"messages", overflow)
	}
}
