package counter

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Counter counts requests per (limit, key) in sliding windows of slices.
// It is safe for concurrent use; see doc.go for the contract.
type Counter struct {
	seed      maphash.Seed
	shards    []shard
	mask      uint64
	shardCap  int   // the largest shard's share of MaxKeys (shard.cap)
	tolPPM    int64 // Tolerance in parts per million
	untracked atomic.Uint64

	regMu   sync.Mutex
	slots   map[string]uint16 // registered limit identity -> table index
	infos   []limitInfo       // by slot
	origins map[string]uint16 // peer node name -> origin number (0 is this node)
	names   []string          // by origin number; names[0] is this node's name
	// families are the declared families of limits by name (family.go).
	families map[string]*family

	merges sync.Pool // *mergeWork, reused by Merge

	cluster atomic.Pointer[clusterState] // nil: single node
	regGen  atomic.Uint64                // registrations and max changes so far: Routed's cache key
	routed  atomic.Pointer[routedSet]    // Routed's last answer
	tickNo  atomic.Uint32                // AppendChanges calls: numbers the sync intervals
	tickAt  atomic.Int64                 // unix ms of the last AppendChanges
	lead    atomic.Int64                 // ms: SetClockLead
}

// limitInfo is what the registry knows of a slot, for merging and syncing.
type limitInfo struct {
	id       string // name|windowMs|slices, the limit's identity on the wire
	windowMs int64
	sliceMs  int64
	max      int64 // the max of the latest registration; MaxLimit for a family's
	family   bool  // a family's registration (family.go): every call states its max
}

// perOrigin is the most slices of one (limit, key) an origin can have live
// at once, with a wide margin: Merge refuses a peer's new slice past it.
// An origin opens a slice at most once a millisecond, and its live slices
// start within a window of now (Merge takes starts up to a window ahead
// too: clocks differ), so at most 2 x window-in-ms; and a slice holds at
// least one request, opened either a slice-length after the previous one
// (at most slices+1 of those) or because the previous one's tail was full,
// so at most the requests the origin admitted in its window: about max,
// and below 4 x max even across restarts that forgot earlier slices
// (each process admits at most max into its own view).
func (li limitInfo) perOrigin() int {
	slices := li.windowMs / li.sliceMs
	return int(min(2*li.windowMs, slices+1+4*li.max))
}

// shard is one lock's worth of the key space. A key's tables for every limit
// live in the same shard, so one lock makes a multi-limit check atomic.
type shard struct {
	mu        sync.Mutex
	tables    []table     // indexed by Limit.slot
	keys      int         // entries over all tables
	lastSweep int64       // unix ms of the last capacity-driven sweep
	dirty     []change    // local slices changed since the last AppendChanges (cluster mode)
	hot       hotSet      // keys that reached HotShare of a limit (cluster mode)
	restored  []dirtyRef  // keys whose own slices a peer gave back: sent on at the next AppendChanges
	coord     *coordState // grants and remembered denials (coordinated cluster), nil until first used
	cap       int         // this shard's share of MaxKeys: the shares add up to MaxKeys exactly
	scratch   *scratch    // a call's states and the lists they move (packed.go), nil until first used
	// 128 bytes a shard: neighbours never share a cache line.
}

// scratch is what a call of the shard works with, one of each per limit
// of the call, reused so that a check allocates (and zeroes) nothing.
// Guarded by the shard's mutex.
type scratch struct {
	bufs   [MaxLimitsPerCall]scratchBuf
	states [MaxLimitsPerCall]state
}

func (s *shard) work() *scratch {
	if s.scratch == nil {
		s.scratch = new(scratch)
	}
	return s.scratch
}

// buf returns the i-th scratch buffer, for table.get.
func (s *shard) buf(i int) *scratchBuf { return &s.work().bufs[i] }

// unlock ends a call that used the first n of the scratch states. Their
// slices point into the tables' slabs: dropped, they keep no slab alive
// once it has grown (and the memory measured per client honest).
func (s *shard) unlock(n int) {
	for i := range s.scratch.states[:n] {
		s.scratch.states[i].sl.b = nil
	}
	s.mu.Unlock()
}

// dirtyRef names a key of one limit (its slot), as the shard's lists and
// maps name it: changes, restored keys, hot keys, resets, coordination.
type dirtyRef struct {
	slot uint16
	key  string
}

// change is one local slice that counted hits since the last
// AppendChanges, as the check that counted them last left it: the next
// AppendChanges sends it as it stands here, without reading the key's
// block again (a tick's keys are spread over the whole table, and reading
// each one's block was half of what collecting cost). A slice's count
// only grows, and only by a check, which updates its change in place
// (state.changed names it), so the newest is what the block holds.
type change struct {
	dirtyRef
	start   int64
	count   uint32
	next    uint32 // 1 + the index of the key's change after this one (a slice opened since), 0: none
	follows bool   // the key has a change before this one in the list
}

// New returns a Counter with the given configuration.
func New(cfg Config) (*Counter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Counter{
		seed:     maphash.MakeSeed(),
		shards:   make([]shard, cfg.Shards),
		mask:     uint64(cfg.Shards - 1),
		shardCap: (cfg.MaxKeys + cfg.Shards - 1) / cfg.Shards,
		tolPPM:   tolerancePPM(cfg.Tolerance),
		slots:    make(map[string]uint16),
		origins:  make(map[string]uint16),
		names:    []string{""},
	}
	// MaxKeys is a hard cap: the shares differ by at most one and add up
	// to it (rounding every share up let 100,000 track 100,032).
	for i := range c.shards {
		c.shards[i].cap = cfg.MaxKeys / cfg.Shards
		if i < cfg.MaxKeys%cfg.Shards {
			c.shards[i].cap++
		}
	}
	return c, nil
}

// MaxLimit is the largest declared limit a Limit may have.
const MaxLimit = 1<<31 - 1

// MaxSlices is the largest number of slices per window.
const MaxSlices = 3600

// Limit registers (or looks up) the limit called name with the given window
// and slice count and returns it with max as its declared limit. Counts are
// kept per (name, window, slices): registering the same triple again, with
// the same or another max, returns a Limit that shares the counts, so a rule
// reload that only changes a limit keeps its clients' windows. For a name
// declared a family (Family), a new triple counts against the family's
// pairs (ErrFamilyFull past them), and max is the returned Limit's only.
func (c *Counter) Limit(name string, max int64, window time.Duration, slices int) (Limit, error) {
	if err := checkLimit(max, window, slices); err != nil {
		return Limit{}, err
	}
	windowMs := window.Milliseconds()
	id := LimitID(name, window, slices)
	c.regMu.Lock()
	defer c.regMu.Unlock()
	fam := c.families[name]
	slot, err := c.register(id, max, windowMs, slices, fam)
	if err != nil {
		return Limit{}, err
	}
	return Limit{slot: slot, max: max, windowMs: windowMs, sliceMs: windowMs / int64(slices), name: name, family: fam != nil}, nil
}

// maxTail is how many requests a slice may hold after its start instant: the
// most that can hide in the one slice that straddles the window's start. In
// a cluster every node has such a slice, so each gets its share (cluster.go).
func (c *Counter) maxTail(max int64, cs *clusterState) int64 {
	if cs != nil {
		return cs.maxTail(max, c.tolPPM)
	}
	return max * c.tolPPM / 1e6
}

// locate returns key's shard and its tag in the shard's tables: the low
// bits of one hash pick the shard, the high half the table slot.
func (c *Counter) locate(key string) (*shard, uint32) {
	h := c.hash(key)
	return &c.shards[h&c.mask], uint32(h >> 32)
}

func (c *Counter) hash(key string) uint64 { return maphash.String(c.seed, key) }

// tagOf is key's tag, as locate returns it, for a key whose shard is known.
func (c *Counter) tagOf(key string) uint32 { return uint32(c.hash(key) >> 32) }

// AllowNow is shorthand for c.Allow(time.Now(), key, hits, limits, results).
func (c *Counter) AllowNow(key string, hits int64, limits []Limit, results []Result) (Decision, error) {
	return c.Allow(time.Now(), key, hits, limits, results)
}

// Allow decides whether hits more requests of key, arriving at t, fit every
// limit in limits, and counts them against all of them only if they do.
// results must have room for len(limits) entries; results[i] describes
// limits[i]. It returns ErrInvalidHits when hits < 1 or hits exceeds a limit
// (such a request can never fit) and ErrTooManyLimits for more than
// MaxLimitsPerCall limits; nothing is counted then.
//
// In a coordinated cluster (ClusterConfig.Coordinated) a request that fits
// the window as this node knows it but not its blind share returns
// Decision.Coordinate, with nothing counted: the caller asks the key's
// coordinator (PrepareAsk here, Coordinate there) and then counts a grant
// with Grant, or decides with AllowFallback when no answer comes in time.
func (c *Counter) Allow(t time.Time, key string, hits int64, limits []Limit, results []Result) (Decision, error) {
	return c.allow(t, key, hits, limits, results, modeAuto)
}

// AllowFallback is Allow for a node that could not reach the key's
// coordinator in time: it decides alone, with the per-node budget
// (ClusterConfig.Budget) in place of the coordinator, and never returns
// Decision.Coordinate.
func (c *Counter) AllowFallback(t time.Time, key string, hits int64, limits []Limit, results []Result) (Decision, error) {
	return c.allow(t, key, hits, limits, results, modeFallback)
}

// Grant counts hits that the key's coordinator granted (Coordinate returned
// Allowed for this node's ask), without checking the window again: the
// coordinator decided on a view that includes this node's slices as the
// ask carried them. results, the coordinator's view on entry, get the
// local view after the hits. Of a routed limit, what the coordinator
// counted beyond this node's own count is kept for the budget (heard.go).
func (c *Counter) Grant(t time.Time, key string, hits int64, limits []Limit, results []Result) (Decision, error) {
	// The lease the answer lent, if every limit has one (Result.Lease):
	// allow overwrites results.
	var lease int64
	var gen uint32
	for i := range limits {
		if i >= len(results) || results[i].Lease <= 0 {
			lease = 0
			break
		}
		if i == 0 || results[i].Lease < lease {
			lease, gen = results[i].Lease, results[i].LeaseGen
		}
	}
	// What is left to do after counting: hold the lease, and hear what the
	// coordinator counted of a routed limit (cs nil on one node: neither).
	cs := c.cluster.Load()
	coordinated := cs.coordinated()
	leased := coordinated && lease > 0 && cs.LeaseShare > 0
	routed := coordinated && slices.ContainsFunc(limits, func(l Limit) bool { return cs.routed(l.max, c.tolPPM) })
	// The coordinator's view, which allow overwrites with this node's.
	var coord [MaxLimitsPerCall]Result
	var nc int
	if routed {
		nc = copy(coord[:], results[:min(len(results), len(limits), MaxLimitsPerCall)])
	}
	d, err := c.allow(t, key, hits, limits, results, modeGrant)
	if err != nil || !leased && !routed {
		return d, err
	}
	s, tag := c.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if routed {
		// What the coordinator counted beyond this node's own count before
		// the hits (results[i].Count, allow's view), for the budget (heard.go).
		var own [MaxLimitsPerCall]int64
		for i := range limits {
			own[i] = results[i].Count
		}
		c.hearResults(s, tag, cs, t.UnixMilli(), key, limits, coord[:nc], own[:len(limits)])
	}
	if !leased || s.coord == nil {
		return d, nil // or no ask of this key was prepared here
	}
	// Until the limit's lease time after this instant, the answer's: the
	// coordinator counts the lease for the longer lease time, the longest
	// answer delay and a grant's lifetime after it took the ask.
	clk := c.syncClock(cs, t.UnixMilli())
	for _, l := range limits {
		until := t.UnixMilli() + cs.leaseTime(cs.routed(l.max, c.tolPPM)).Milliseconds()
		s.coord.lookup(dirtyRef{slot: l.slot, key: key}).hold(lease, until, gen, clk)
	}
	return d, nil
}

// mode selects how allow decides a request that fits the window.
type mode uint8

const (
	// modeAuto: the blind share, else Decision.Coordinate; without
	// coordination, the budget as configured.
	modeAuto mode = iota
	// modeFallback: the budget decides in place of the coordinator.
	modeFallback
	// modeDecide: this node coordinates the key; the window alone decides.
	modeDecide
	// modeGrant: the coordinator said yes; count without a check.
	modeGrant
)

func (c *Counter) allow(t time.Time, key string, hits int64, limits []Limit, results []Result, m mode) (Decision, error) {
	if len(limits) > MaxLimitsPerCall {
		return Decision{}, fmt.Errorf("%w: %d > %d", ErrTooManyLimits, len(limits), MaxLimitsPerCall)
	}
	if len(results) < len(limits) {
		return Decision{}, fmt.Errorf("counter: results has room for %d of %d limits", len(results), len(limits))
	}
	if hits < 1 {
		return Decision{}, fmt.Errorf("%w: hits must be at least 1, got %d", ErrInvalidHits, hits)
	}
	for _, l := range limits {
		if hits > l.max {
			return Decision{}, fmt.Errorf("%w: hits %d exceed the limit %d of %q", ErrInvalidHits, hits, l.max, l.name)
		}
	}
	now := t.UnixMilli()
	var (
		found  [MaxLimitsPerCall]bool
		dirty  [MaxLimitsPerCall]bool
		leased [MaxLimitsPerCall]bool
		at     [MaxLimitsPerCall]int64
		keys   [MaxLimitsPerCall]*keyCoord
	)
	d := Decision{Allowed: true}
	cs := c.cluster.Load()
	coordinated := cs.coordinated()
	lag := c.lagMs()
	s, tag := c.locate(key)
	s.mu.Lock()
	work := s.work()
	states := &work.states
	defer s.unlock(len(limits))
	defer s.coord.tidyAll(limits, key, keys[:len(limits)])
	for i, l := range limits {
		st := &states[i]
		ok := s.table(l).get(tag, key, &work.bufs[i], i > 0 && repeats(limits, i), st)
		var count int64
		at[i] = s.coord.resetsOf().clamp(l.slot, key, now) // reset.go
		if ok {
			at[i] = st.clamp(at[i])
			dirty[i] = st.expire(at[i]-lag, l.windowMs)
			count = st.count()
		}
		// The key's coordination record, looked up once for the grants,
		// the denial and the lease below (coordkey.go).
		k := s.coord.lookup(dirtyRef{slot: l.slot, key: key})
		keys[i] = k
		// Grants this node made as the key's coordinator that the merged
		// slices do not show yet (coordinate.go).
		pending := k.invisible(st, at[i], l.windowMs)
		count += pending
		found[i] = ok
		r := Result{Allowed: count+hits <= l.max || m == modeGrant, Limit: l.max, Count: count, Pending: pending, Remaining: max(l.max-count, 0)}
		var unacked int64
		var clk syncClock
		if cs != nil {
			clk = c.syncClock(cs, at[i])
			st.roll(clk.tick)
			unacked = clk.unacked(int64(st.pending), int64(st.prev))
		}
		if r.Allowed && m == modeAuto && coordinated {
			if until := s.coord.deniedUntil(k, at[i], l.max); until > 0 {
				// The coordinator said no, and its counted slices are still
				// in the window until then: the denial is still right.
				c.denyResult(&r, &d, until-at[i], st.reset(at[i], l.windowMs))
				results[i] = r
				continue
			}
			if unacked+hits > cs.blind(l.max, c.tolPPM) {
				// Past the blind share: a lease from the coordinator, or
				// the coordinator itself.
				if k.leaseCovers(at[i], hits, clk, !cs.routed(l.max, c.tolPPM)) {
					leased[i] = true
				} else {
					d.Coordinate = true
				}
			}
		}
		if r.Allowed && m == modeFallback && cs != nil && cs.routed(l.max, c.tolPPM) {
			// Of a routed key this node counts only its own admissions:
			// the budget judges the check against the others' too, as the
			// coordinator last told them (heard.go), and waits for the
			// next ask when they fill the window.
			if count+k.heard(at[i])+hits > l.max {
				c.denyResult(&r, &d, cs.syncInterval.Milliseconds(), st.reset(at[i], l.windowMs))
				results[i] = r
				continue
			}
		}
		budgeted := m == modeFallback || m == modeAuto && !coordinated
		if r.Allowed && budgeted && cs != nil && !cs.withinBudget(l, count, unacked, hits, c.tolPPM) {
			// Room in the window, but more than this node's share of it
			// until peers hear of it: wait for the next sync. Nothing is
			// left for this request here, whatever the window holds.
			c.denyResult(&r, &d, cs.syncInterval.Milliseconds(), st.reset(at[i], l.windowMs))
			results[i] = r
			continue
		}
		if !r.Allowed {
			r.RetryAfter = time.Duration(c.retryMs(s, dirtyRef{slot: l.slot, key: key}, st, at[i], l.windowMs, count, hits, l.max)) * time.Millisecond
			r.Reset = time.Duration(st.reset(at[i], l.windowMs)) * time.Millisecond
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
		}
		results[i] = r
	}
	if !d.Allowed || d.Coordinate {
		if !d.Allowed {
			d.Coordinate = false // denied here: no need to ask
		} else {
			d.Allowed = false
		}
		for i, l := range limits {
			if dirty[i] {
				s.store(l.slot, tag, key, &states[i])
			}
			if results[i].Reset == 0 {
				results[i].Reset = time.Duration(states[i].reset(at[i], l.windowMs)) * time.Millisecond
			}
		}
		return d, nil
	}
	if s.sweepFor(now, lag, found[:len(limits)]) {
		// The sweep rewrote the shard's blocks: read the states again.
		for i, l := range limits {
			if found[i] {
				found[i] = s.reread(l, tag, key, i, repeats(limits, i), &states[i], at[i]-lag)
			}
		}
	}
	for i, l := range limits {
		if !found[i] && !s.room(&s.tables[l.slot]) {
			d.Untracked = true
			c.untracked.Add(1)
			results[i].Remaining = l.max - hits
			continue
		}
		if leased[i] {
			keys[i].useLease(hits) // live, so not swept: kept in the map
			d.Leased = true
		}
		st := &states[i]
		st.add(at[i], uint32(hits), l.sliceMs, c.maxTail(l.max, cs))
		if cs != nil {
			st.pending += uint32(hits) // st was rolled above
			// An ask's key (Coordinate): the caller may reuse its bytes
			// (Ask), so a new change keeps a copy.
			s.recordChange(l.slot, key, m == modeDecide, c.tickNo.Load(), st)
			if cs.isHot(results[i].Count+hits, l.max) {
				s.hot.mark(l.slot, key, l.max)
			}
		}
		s.store(l.slot, tag, key, st)
		results[i].Remaining = max(l.max-results[i].Count-hits, 0)
		results[i].Reset = time.Duration(st.reset(at[i], l.windowMs)) * time.Millisecond
	}
	return d, nil
}

// repeats reports whether limits[i] is also an earlier limit of the call:
// each gets its own copy of the state, as if the other were not there.
func repeats(limits []Limit, i int) bool {
	for _, l := range limits[:i] {
		if l.slot == limits[i].slot {
			return true
		}
	}
	return false
}

// retryMs is the wait after which the same request fits, for a window
// counting count (invisible grants included, see coordinate.go). A grant
// not yet in the merged slices leaves the window with the asker's slice
// that will hold it, so it is taken as a slice of its own at that start.
func (c *Counter) retryMs(s *shard, ref dirtyRef, st *state, now, windowMs, count, hits, max int64) int64 {
	var buf [maxRetryGaps]gap
	gs := s.coord.gaps(ref, st, now, windowMs, buf[:0])
	if len(gs) == 0 {
		return st.retryAfter(now, windowMs, count, hits, max)
	}
	// Slices and grants leave in start order, oldest first.
	j := 0
	for i := 0; i < st.sl.n || j < len(gs); {
		var start, n int64
		if j < len(gs) && (i == st.sl.n || gs[j].start < st.start(i)) {
			start, n = gs[j].start, gs[j].n
			j++
		} else {
			start, n = st.start(i), int64(st.sl.count(i))
			i++
		}
		if count -= n; count+hits <= max {
			return start + windowMs - now
		}
	}
	return 1 // unreachable when hits <= max
}

// denyResult marks r (and so d) denied although the window has room: by a
// remembered coordinator denial or by the budget. Nothing remains for the
// request, and it may be tried again after retryMs.
func (c *Counter) denyResult(r *Result, d *Decision, retryMs, resetMs int64) {
	r.Allowed = false
	r.Remaining = 0
	r.RetryAfter = time.Duration(retryMs) * time.Millisecond
	r.Reset = time.Duration(resetMs) * time.Millisecond
	d.Allowed = false
	d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
}

// table returns the shard's table for l, creating it on first use.
func (s *shard) table(l Limit) *table {
	if int(l.slot) >= len(s.tables) {
		s.tables = append(s.tables, make([]table, int(l.slot)+1-len(s.tables))...)
	}
	t := &s.tables[l.slot]
	if t.windowMs == 0 {
		t.windowMs = l.windowMs
	}
	return t
}

// store writes st back as key's state in the slot's table, dropping the
// key when its window is empty. The table copies the key's bytes when it
// adds the key, so the caller's key (a request line, a decode buffer) is
// never retained.
func (s *shard) store(slot uint16, tag uint32, key string, st *state) {
	s.keys += s.tables[slot].put(tag, key, st)
}
