package counter

import "time"

// maxClockLead bounds SetClockLead: far past any offset a cluster keeps
// merging (the engine's MaxClockOffset, a second by default).
const maxClockLead = time.Minute

// SetClockLead sets how far this node's clock runs ahead of its peers',
// at least, as they measured it (the cluster engine takes the least lead
// the askers of this node's keys report: counter.Ask.Lead). From then on
// the counter judges every window as of its now less the lead: a slice
// leaves the window, in every check, merge, ask decided, sweep and set of
// changes collected to send (AppendChanges), that much later, while new
// requests are still counted at now.
//
// Why: a slice is stamped on its origin's clock. A node whose clock runs
// ahead by d sees its peers' slices leave its window d early and, as a
// routed key's coordinator (the only node that knows the key's total),
// would grant into that room d before the peers' own clocks show it
// (docs/faults.md, scenario 5). Judged d later, the peers' slices leave on
// their own time; its own slices, stamped on its clock, stay d longer,
// which is how its peers count them anyway (an over-count: NFR1's side).
//
// A lead only ever makes the counter count more, so it is bounded by what
// it must not do: deny a compliant client (NFR2). The lead given must be
// at most the true one, which a peer's measurement is (a message's offset
// is the clocks' difference less its delay); on one clock it is 0, and the
// counter is exactly as without it. Negative is taken as 0, and more than
// a minute as a minute. Safe for concurrent use; a check in progress may
// judge with the lead before or after the change.
func (c *Counter) SetClockLead(d time.Duration) {
	c.lead.Store(min(max(d, 0), maxClockLead).Milliseconds())
}

// ClockLead returns the lead SetClockLead set.
func (c *Counter) ClockLead() time.Duration {
	return time.Duration(c.lead.Load()) * time.Millisecond
}

// lagMs is the lead in ms, what the window's end is moved back by.
func (c *Counter) lagMs() int64 { return c.lead.Load() }
