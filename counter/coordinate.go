package counter

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnknownLimit is returned by Coordinate for an ask that names a limit
// this node has not registered (its rules differ from the asker's, for
// instance during a reload): the asker decides alone.
var ErrUnknownLimit = errors.New("counter: unknown limit")

// Ask is what a node sends a key's coordinator for a check that fits the
// window as the node knows it but not its blind share. PrepareAsk fills it;
// the cluster layer carries it; Coordinate decides it.
//
// Coordinate does not retain the strings of an ask (Key, Limits, Entries);
// it copies what it keeps (the key of a new grant, as Merge does for the
// entries), so they may alias a buffer reused once it returns.
type Ask struct {
	Key  string
	Hits int64
	// Limits are the identities (LimitID) of the limits the check names,
	// in the order of its results.
	Limits []string
	// Max, parallel to Limits or empty, is the max each limit is checked
	// with: the call's, for a limit of a family (Family), whose max is
	// per call; 0 for a limit with a registered max, which the
	// coordinator decides with its own registration's. PrepareAsk sets it
	// only when a limit of the check is a family's, and leaves it empty
	// otherwise (an ask without it is what coordinators of every version
	// decide: package cluster/engine).
	Max []int64
	// Preds, parallel to Limits, say where the asker will count the hits
	// if they are granted: the start of its slice that takes them (its
	// open slice, or the ask's instant for a new one) and that slice's
	// count afterwards. The coordinator counts a grant until the merged
	// slices show it, and never beside them (coordinate.go).
	Preds []Pred
	// Entries are the asker's own recent slices of the key, merged by the
	// coordinator before it decides: absolute counts, so they add nothing
	// twice, and the coordinator's view of the asker is exact.
	Entries []Entry
	// Settled is the asker's highest ask id at or below which every ask of
	// its own is over: its grant counted, or its answer given up on (the
	// cluster layer sets it; 0: none). After merging Entries, a grant to
	// the asker with such an id that its slices still do not show was
	// never counted (its answer was lost and the asker decided alone), and
	// the coordinator stops counting it.
	Settled uint64
	// Want is the lease the asker would like (ClusterConfig.LeaseShare),
	// from its current pace: twice its admissions of a sync interval for
	// a lease that bounds its unacknowledged admissions, its
	// admissions in LeaseTime for a routed limit's, which is spent
	// (lease.go). 0: none.
	Want int64
	// Gen numbers the asker's asks about the key: the coordinator lends
	// a lease only to the newest it has decided, and the asker takes one
	// only from the answer to its newest (lease.go).
	Gen uint32
	// Lead is how far the coordinator's clock runs ahead of the asker's,
	// at least, as the asker measured it (the engine: the largest offset
	// of the coordinator's recent messages, each the clocks' difference
	// less its delay); 0 when it is not ahead or the asker does not know.
	// The counter does not read it: the coordinator's engine takes the
	// least lead its askers report as its counter's (SetClockLead).
	Lead time.Duration
}

// Pred is where granted hits will be counted: the asker's slice starting
// at Start (unix ms, the asker's clock), holding After requests then.
type Pred struct {
	Start int64
	After uint32
}

// maxAnswerDelay is the longest an asker waits for an answer (the
// decision layer's deadline is at most a second): a lease is used from
// the answer's arrival, so the coordinator counts it that much longer.
const maxAnswerDelay = time.Second

// maxAskEntries is how many of its newest slices an ask carries per limit
// at least, and MaxAskEntries how many it carries in all at most. Between
// the two it carries every slice that may hold a hit admitted on a lease
// the coordinator may still count for the asker and that may not be
// merged anywhere yet: one that may have changed since the newest lease
// taken on the key was asked for (heldLease.leaseFrom; when that is not
// known, any) and within a grant's lifetime. A coordinator drops the
// asker's old lease on a new ask, counting on those slices to bring what
// that lease admitted. When they do not all fit, the ask wants no lease
// (Want 0), so the old one stays counted until it expires.
const (
	maxAskEntries = 8
	MaxAskEntries = maxAskEntries * MaxLimitsPerCall
)

// PrepareAsk fills ask for a check of key that Allow answered with
// Decision.Coordinate. It counts nothing. ask's slices are reused.
func (c *Counter) PrepareAsk(t time.Time, key string, hits int64, limits []Limit, ask *Ask) {
	now := t.UnixMilli()
	cs := c.cluster.Load()
	ask.Key, ask.Hits, ask.Want, ask.Gen = key, hits, 0, 0
	ask.Limits, ask.Preds, ask.Entries, ask.Max = ask.Limits[:0], ask.Preds[:0], ask.Entries[:0], ask.Max[:0]
	for _, l := range limits {
		if l.family {
			for _, l := range limits {
				ask.Max = append(ask.Max, familyMax(l))
			}
			break
		}
	}
	self := c.Self()
	unsent := false // a slice that may not be merged did not fit the ask
	s, tag := c.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range limits {
		id := l.ID()
		ask.Limits = append(ask.Limits, id)
		var st state
		ok := s.table(l).get(tag, key, s.buf(0), false, &st)
		if cs != nil {
			pace := st // a copy: rolling it must not touch the stored state
			pace.roll(c.tickNo.Load())
			if w := cs.want(&pace, hits, cs.routed(l.max, c.tolPPM)); i == 0 || w < ask.Want {
				ask.Want = w
			}
		}
		p := Pred{Start: now, After: uint32(hits)}
		if !ok {
			ask.Preds = append(ask.Preds, p)
			continue
		}
		at := st.clamp(now)
		if st.expire(at-c.lagMs(), l.windowMs) {
			s.store(l.slot, tag, key, &st)
		}
		p.Start = at
		if i := st.newestLocal(); i >= 0 && !st.is(flagClosed) {
			sl, start := st.sl.at(i), st.start(i)
			if at == start || at-start < l.sliceMs && int64(sl.n)-int64(st.head)+hits <= c.maxTail(l.max, cs) {
				p = Pred{Start: start, After: sl.n + uint32(hits)}
			}
		}
		ask.Preds = append(ask.Preds, p)
		fresh := now // without a cluster: no lease to replace
		if cs != nil {
			fresh = now - cs.grantTTLMs()
			if from, ok := s.coord.lookup(dirtyRef{slot: l.slot, key: key}).leaseFrom(); ok {
				fresh = max(fresh, from)
			}
		}
		if !st.appendAskEntries(ask, id, key, self, fresh, MaxAskEntries/len(limits)) {
			unsent = true
		}
	}
	switch {
	case unsent:
		// The coordinator must not replace the lease this node holds, so
		// the ask wants none, and the old one is kept: the coordinator
		// counts it until it expires, and it may still cover a check.
		ask.Want = 0
	case cs.coordinated() && cs.LeaseShare > 0:
		// No lease is used while the ask is out: what the old one admitted
		// is in the slices above, and the answer may bring a new one.
		var refs [MaxLimitsPerCall]dirtyRef
		for i, l := range limits {
			refs[i] = dirtyRef{slot: l.slot, key: key}
		}
		if s.coord == nil {
			s.coord = &coordState{}
		}
		ask.Gen = s.coord.askLeases(refs[:len(limits)], now)
	}
}

// appendAskEntries appends to ask the newest local slices of st: at least
// maxAskEntries (as many as there are), and every one that may have
// changed at or after fresh (newestBack), up to most in all. It reports
// whether every slice that may have changed since fresh is in.
func (st *state) appendAskEntries(ask *Ask, id, key, self string, fresh int64, most int) bool {
	n := 0
	for j, changed := range st.newestBack(0, fresh) {
		switch {
		case n < maxAskEntries || changed && n < most:
		case changed:
			return false
		default:
			return true
		}
		ask.Entries = append(ask.Entries, Entry{Limit: id, Key: key, Origin: self, Start: st.start(j), Count: st.sl.count(j)})
		n++
	}
	return true
}

// familyMax is what an ask states as l's max (Ask.Max): its call's for a
// family's limit, 0 (the registration's) otherwise.
func familyMax(l Limit) int64 {
	if l.family {
		return l.max
	}
	return 0
}

// Coordinate decides an ask as the key's coordinator: it merges the
// asker's slices, then allows iff every limit's window, as this node knows
// it plus the grants it made that the merged slices do not show yet, has
// room for the hits. A grant is recorded under (from, id) and counted until
// the merged slices show it, until Release(from, id), or for two sync
// intervals and the grace; it is never counted beside the slices that
// hold it. results describe the limits in ask order, Remaining as this
// node sees it after the decision. An ask of this node's own (from ==
// Self) is decided and counted here, as a local check would be.
//
// It never over-counts, so a denial is right: at least limit − hits + 1
// requests of the key were accepted in the window (NFR2). It returns
// ErrUnknownLimit for a limit not registered here and ErrInvalidHits for
// hits out of range; nothing is granted then.
//
// Each limit is decided with the max the ask states for it (Ask.Max), or
// with this node's registration's where it states none; a limit of a
// family (Family), registered here on first sight if need be, must have
// one stated (ErrInvalidLimit otherwise: its registration's max is no
// caller's).
func (c *Counter) Coordinate(t time.Time, from string, id uint64, ask *Ask, results []Result) (Decision, error) {
	if len(ask.Limits) > MaxLimitsPerCall || len(ask.Preds) != len(ask.Limits) {
		return Decision{}, fmt.Errorf("%w: %d limits, %d predictions", ErrTooManyLimits, len(ask.Limits), len(ask.Preds))
	}
	if len(ask.Max) != 0 && len(ask.Max) != len(ask.Limits) {
		return Decision{}, fmt.Errorf("%w: %d maxes for %d limits", ErrInvalidLimit, len(ask.Max), len(ask.Limits))
	}
	var limits [MaxLimitsPerCall]Limit
	for i, lid := range ask.Limits {
		slot, info, ok := c.lookupOrRegister(lid)
		if !ok {
			return Decision{}, fmt.Errorf("%w: %q", ErrUnknownLimit, lid)
		}
		max := info.max
		if len(ask.Max) > 0 && ask.Max[i] != 0 {
			max = ask.Max[i]
		}
		switch {
		case max < 1 || max > MaxLimit:
			return Decision{}, fmt.Errorf("%w: limit %q with max %d", ErrInvalidLimit, lid, max)
		case info.family && (len(ask.Max) == 0 || ask.Max[i] == 0):
			return Decision{}, fmt.Errorf("%w: limit %q is a family's, and the ask states no max for it", ErrInvalidLimit, lid)
		}
		limits[i] = Limit{slot: slot, max: max, windowMs: info.windowMs, sliceMs: info.sliceMs, name: lid, family: info.family}
	}
	ls := limits[:len(ask.Limits)]
	if from == c.Self() {
		return c.allow(t, ask.Key, ask.Hits, ls, results, modeDecide)
	}
	if len(results) < len(ls) {
		return Decision{}, fmt.Errorf("counter: results has room for %d of %d limits", len(results), len(ls))
	}
	if ask.Hits < 1 || ask.Hits > MaxLimit {
		return Decision{}, fmt.Errorf("%w: hits must be between 1 and %d, got %d", ErrInvalidHits, MaxLimit, ask.Hits)
	}
	for _, l := range ls {
		if ask.Hits > l.max {
			return Decision{}, fmt.Errorf("%w: hits %d exceed the limit %d", ErrInvalidHits, ask.Hits, l.max)
		}
	}
	// The asker's own slices only: an ask cannot speak for a third node.
	es := ask.Entries[:0:0]
	for _, e := range ask.Entries {
		if e.Origin == from && e.Key == ask.Key {
			es = append(es, e)
		}
	}
	c.Merge(t, es)

	now := t.UnixMilli()
	lag := c.lagMs()
	cs := c.cluster.Load()
	origin := c.originOf(from)
	d := Decision{Allowed: true}
	s, tag := c.locate(ask.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks [MaxLimitsPerCall]*keyCoord // each limit's record, looked up once
	for i, l := range ls {
		var st state
		ok := s.table(l).get(tag, ask.Key, s.buf(i), repeats(ls, i), &st)
		var count int64
		// The window as of the peers' time (SetClockLead); grants keep now.
		wnow := now - lag
		if ok {
			if st.expire(wnow, l.windowMs) {
				s.store(l.slot, tag, ask.Key, &st)
			}
			count = st.count()
		}
		k := s.coord.lookup(dirtyRef{slot: l.slot, key: ask.Key})
		ks[i] = k
		s.coord.followAsk(k, origin, ask.Gen)
		if ask.Settled > 0 {
			k.settle(&st, origin, ask.Settled)
		}
		pending := k.invisible(&st, now, l.windowMs)
		count += pending
		r := Result{Allowed: count+ask.Hits <= l.max, Limit: l.max, Count: count, Pending: pending, Remaining: max(l.max-count, 0)}
		r.Reset = time.Duration(st.reset(wnow, l.windowMs)) * time.Millisecond
		if !r.Allowed {
			r.RetryAfter = time.Duration(c.retryMs(s, dirtyRef{slot: l.slot, key: ask.Key}, &st, wnow, l.windowMs, count, ask.Hits, l.max)) * time.Millisecond
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
		}
		results[i] = r
	}
	if !d.Allowed {
		for i, l := range ls {
			s.coord.tidy(dirtyRef{slot: l.slot, key: ask.Key}, ks[i])
		}
		return d, nil
	}
	if s.coord == nil {
		s.coord = &coordState{}
	}
	ttl := int64(200)
	if cs != nil {
		ttl = cs.grantTTLMs()
	}
	lease := ask.Want
	for i, l := range ls {
		p := ask.Preds[i]
		ref := dirtyRef{slot: l.slot, key: ask.Key}
		if ks[i] == nil {
			ks[i] = s.coord.upsert(ref) // kept, not tidied: it is about to hold a grant
		}
		ks[i].grant(grant{
			origin: origin, id: id, start: p.Start, after: p.After, hits: uint32(ask.Hits), expires: now + ttl,
		})
		results[i].Remaining = max(l.max-results[i].Count-ask.Hits, 0)
		if results[i].Reset == 0 {
			results[i].Reset = l.Window()
		}
		if lease > 0 && cs != nil {
			// What is left of the key's lease pool once the other nodes'
			// leases are out, shared fairly among the holders, and no
			// more than the window has room for.
			out, others := s.coord.leasesOutTo(ks[i], origin, ask.Gen, now)
			lease = min(lease, leaseFor(cs.leaseCap(l.max, c.tolPPM), out, others, !cs.routed(l.max, c.tolPPM)), results[i].Remaining)
		}
	}
	if lease > 0 {
		// Counted against the pool until the holder has stopped using it
		// (its lease time after the answer reached it, at most
		// maxAnswerDelay after now) and what it admitted has reached this
		// node (a grant's lifetime).
		expires := now + cs.lentLeaseMs()
		for i := range ls {
			if !s.coord.lend(ks[i], lentLease{expires: expires, id: id, hits: uint32(lease), gen: ask.Gen, origin: origin}) {
				lease = 0 // refused for one limit: the holder takes none (a lease is taken for all of a check's limits or none)
			}
		}
		for i := range ls {
			results[i].Lease, results[i].LeaseGen = lease, ask.Gen
		}
	}
	return d, nil
}

// Release drops the grants of the ask (from, id) for key: the asker did
// not count them (its answer came too late and it decided alone, denying).
// Without it they would be counted until they expire.
func (c *Counter) Release(t time.Time, from string, id uint64, key string, limitIDs []string) {
	origin := c.originOf(from)
	s, _ := c.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coord == nil {
		return
	}
	for _, lid := range limitIDs {
		slot, _, ok := c.lookupLimit(lid)
		if !ok {
			continue
		}
		s.coord.release(dirtyRef{slot: slot, key: key}, origin, id)
	}
}

// RememberDenial records the coordinator's answer to a denied check of
// hits of key, results as Coordinate returned them (parallel to limits).
// For a check of one hit, each limit the coordinator found full on its
// merged slices alone is denied here without asking again until its
// RetryAfter, so an over-limit client costs about one round trip per node
// per wait. The denial stays right that long: the slices the coordinator
// counted stay in its window until then, and a wait for one hit is the
// shortest for any check. It denies only checks whose max is at most the
// one denied (a family's limits state theirs per call: a check of the
// same key with a larger max may fit). Not remembered: a check of several
// hits (a smaller one may fit sooner), and a limit that was full only with
// the coordinator's pending grants (Result.Pending): one of those may be a
// grant whose answer was lost, which must not deny for a whole wait. Of a
// routed limit, what the coordinator counted beyond this node's own count
// is kept for the budget, whatever the hits (heard.go).
func (c *Counter) RememberDenial(t time.Time, key string, hits int64, limits []Limit, results []Result) {
	now := t.UnixMilli()
	s, tag := c.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Whatever the hits, what the coordinator counted beyond this node's
	// own count is heard, for the budget (heard.go).
	c.hearResults(s, tag, c.cluster.Load(), now, key, limits, results, nil)
	if hits != 1 {
		return
	}
	for i, l := range limits {
		if i >= len(results) {
			break
		}
		if r := &results[i]; r.Allowed || r.Remaining > 0 || r.RetryAfter <= 0 || r.Count-r.Pending < r.Limit || s.coord.resetsOf().justReset(l.slot, key, now) {
			continue
		}
		if s.coord == nil {
			s.coord = &coordState{}
		}
		s.coord.deny(dirtyRef{slot: l.slot, key: key}, denial{until: now + results[i].RetryAfter.Milliseconds(), max: l.max}, now, c.shardCap)
	}
}

// denial is a coordinator's denial remembered (RememberDenial): until
// when (unix ms) it holds, for checks of a max up to max.
type denial struct {
	until int64
	max   int64
}

// grant is one ask granted by this node: origin will count hits in its
// slice starting at start, which then holds after requests.
type grant struct {
	start   int64
	expires int64 // unix ms on this node's clock
	id      uint64
	after   uint32
	hits    uint32
	origin  uint16
}

// grant records g on k.
func (k *keyCoord) grant(g grant) {
	// Grants still pending on the same slice of the same asker land there
	// too: the later one's count comes after theirs, whatever order the
	// asker counts them in.
	for _, o := range k.grantList() {
		if o.origin == g.origin && o.start == g.start {
			g.after = max(g.after, o.after+g.hits)
		}
	}
	k.lends().grants = append(k.grantList(), g)
}

func (cs *coordState) release(ref dirtyRef, origin uint16, id uint64) {
	k := cs.lookup(ref)
	if k == nil {
		return
	}
	kept := k.grantList()[:0]
	for _, g := range k.grantList() {
		if g.origin != origin || g.id != id {
			kept = append(kept, g)
		}
	}
	k.setGrants(kept)
	cs.unlend(k, origin, id)
	cs.tidy(ref, k)
}

// settle drops the grants of k to origin with an id up to settled that st
// (the asker's slices, just merged from its ask) does not show: the asker
// never counted them. The caller tidies k.
func (k *keyCoord) settle(st *state, origin uint16, settled uint64) {
	if k == nil {
		return
	}
	kept := k.grantList()[:0]
	for _, g := range k.grantList() {
		if g.origin == origin && g.id <= settled && st.grantGap(g) > 0 {
			continue
		}
		kept = append(kept, g)
	}
	k.setGrants(kept)
}

// invisible returns how many granted hits of k's (limit, key) the state st
// does not show at now, dropping the grants it shows, that expired, or
// whose slice has left the window. A grant is shown once its asker's slice
// holds its predicted count, or once the asker has a later slice (it
// counted the hits there, or in the predicted one before opening it): so
// a grant is never counted beside the slice that holds it. The caller
// tidies k.
func (k *keyCoord) invisible(st *state, now, windowMs int64) int64 {
	if k == nil || len(k.grantList()) == 0 {
		return 0
	}
	var sum int64
	kept := k.grantList()[:0]
	for _, g := range k.grantList() {
		if !g.live(now, windowMs) {
			continue
		}
		if gap := st.grantGap(g); gap > 0 {
			sum += gap
			kept = append(kept, g)
		}
	}
	k.setGrants(kept)
	return sum
}

// maxRetryGaps caps the grants retryMs orders among the slices; more than
// that many pending grants on one key are summed into the newest.
const maxRetryGaps = 16

// gap is a grant's part that the merged slices do not show, at the start
// of the asker's slice that will hold it.
type gap struct{ start, n int64 }

// gaps appends, in start order, the grants of ref that st does not show
// and that still count at now: what retryMs needs to tell when they leave
// the window. (After invisible the expired ones are gone already; Peek
// leaves them in place.) Past the buffer's capacity a grant is summed into
// the newest entry (a later start: the wait can only be longer).
func (cs *coordState) gaps(ref dirtyRef, st *state, now, windowMs int64, dst []gap) []gap {
	k := cs.lookup(ref)
	if k == nil {
		return dst
	}
	for _, g := range k.grantList() {
		if !g.live(now, windowMs) {
			continue
		}
		n := st.grantGap(g)
		if n <= 0 {
			continue
		}
		p := gap{start: g.start, n: n}
		if len(dst) == cap(dst) {
			last := &dst[len(dst)-1]
			last.n += p.n
			last.start = max(last.start, p.start)
			continue
		}
		i := len(dst)
		dst = append(dst, p)
		for ; i > 0 && dst[i-1].start > p.start; i-- {
			dst[i] = dst[i-1]
		}
		dst[i] = p
	}
	return dst
}

// grantGap is how many of g's hits st does not show.
func (s *state) grantGap(g grant) int64 {
	// Not a scan of every slice: a hot key holds a dozen slices of every
	// node that admits it, so on a large cluster such a scan for each
	// pending grant of each check was the coordinator's largest cost
	// (BENCHMARKS.md, issue 20). The slices are in start order: the
	// grant's own is found by a binary search, and only those that start
	// after it, a slice's length of them at most, are looked at for a
	// later one of the asker's, which shows the grant whatever its count.
	for j := s.search(g.start+1, 0); j < s.sl.n; j++ {
		if s.sl.origin(j) == g.origin {
			return 0
		}
	}
	var n uint32
	if i := s.search(g.start, g.origin); i < s.sl.n && s.start(i) == g.start && s.sl.origin(i) == g.origin {
		n = s.sl.count(i)
	}
	if n >= g.after {
		return 0
	}
	return min(int64(g.after-n), int64(g.hits))
}

// maxDenied caps the remembered denials per shard; past it a denial is
// not remembered (the next check asks again), so memory stays bounded.
const maxDenied = 4096

func (cs *coordState) deny(ref dirtyRef, d denial, now int64, shardCap int) {
	k := cs.lookup(ref)
	if (k == nil || k.denial.until == 0) && cs.denied >= min(maxDenied, shardCap) {
		for r, o := range cs.keys {
			if o.denial.until != 0 && o.denial.until <= now {
				cs.setDenial(o, denial{})
				cs.tidy(r, o)
			}
		}
		if cs.denied >= min(maxDenied, shardCap) {
			return
		}
	}
	cs.setDenial(cs.upsert(ref), d)
}

// deniedUntil returns the instant until which a coordinator's denial of
// k's (limit, key) holds for a check of max, or 0; an expired one is
// dropped. The caller tidies k.
func (cs *coordState) deniedUntil(k *keyCoord, now, max int64) int64 {
	if k == nil || k.denial.until == 0 {
		return 0
	}
	if k.denial.until <= now {
		cs.setDenial(k, denial{})
		return 0
	}
	if max > k.denial.max {
		return 0
	}
	return k.denial.until
}

// sweep drops expired denials, grants, leases and counts heard.
func (cs *coordState) sweep(now int64) {
	if cs == nil {
		return
	}
	for ref, k := range cs.keys {
		if k.denial.until != 0 && k.denial.until <= now {
			cs.setDenial(k, denial{})
		}
		if k.heardOf.until != 0 && k.heardOf.until <= now {
			k.heardOf = heardCount{}
		}
		kept := k.grantList()[:0]
		for _, g := range k.grantList() {
			if g.expires > now {
				kept = append(kept, g)
			}
		}
		k.setGrants(kept)
		cs.sweepLeases(k, now)
		cs.tidy(ref, k)
	}
}
