package counter

import (
	"strings"
	"time"
)

// Merge adds peers' entries at now. An entry whose Origin is this node's own
// name (sent back by a peer after a restart) restores a local slice, which
// is then closed: new local requests start a new slice, so a restored
// slice's unknown tail can never grow past the bound. A new slice of an
// origin that already has as many slices of the key as its window can hold
// is refused (MergeStats.Refused), so no message can grow a key without
// bound.
//
// Merge keeps none of the entries' strings (Entry): the caller may reuse
// their bytes once it returns.
//
// The entries are applied shard by shard, each shard's in their order, so
// the entries of one key keep theirs. A tick's entries are for keys spread
// over the whole table, and reading a key's slot and block is mostly two
// cache misses. The shards of a batch of about touchBatch entries are
// locked together, in ascending order, and the slots and then the blocks
// of all its entries are read first, at once, so that those misses overlap
// rather than follow one another; each shard is unlocked once its entries
// are applied. Batches span shards because a datagram's 40 to 60 entries
// fall into about as many shards: one shard at a time, their misses were
// paid one after the other.
func (c *Counter) Merge(now time.Time, entries []Entry) MergeStats {
	var ms MergeStats
	nowMs := now.UnixMilli()
	cs := c.cluster.Load()
	w, _ := c.merges.Get().(*mergeWork)
	if w == nil {
		w = new(mergeWork)
	}
	defer c.merges.Put(w)
	w.lag = c.lagMs()
	c.sortEntries(w, nowMs, entries, &ms)

	// The (limit, key, origin) last refused: a forged message's entries
	// come together, and counting that origin's slices again for each of
	// them would cost what the bound saves.
	var last refused
	for lo := 0; lo < len(w.sorted); {
		// A batch: the groups of whole shards, in ascending shard order
		// (so that Merges, each locking in that order, cannot deadlock),
		// until it holds touchBatch entries. Its shards are all locked
		// while their entries are touched together, and each is unlocked
		// as soon as its group is merged.
		hi := lo
		w.ends = w.ends[:0]
		for hi < len(w.sorted) && hi-lo < touchBatch {
			end := hi + 1
			for end < len(w.sorted) && w.sorted[end].shard == w.sorted[hi].shard {
				end++
			}
			c.shards[w.sorted[hi].shard].mu.Lock()
			w.ends = append(w.ends, end)
			hi = end
		}
		w.touch(c.shards, w.sorted[lo:hi])
		for _, end := range w.ends {
			s := &c.shards[w.sorted[lo].shard]
			w.apply(s, w.sorted[lo:end], entries, nowMs, cs, &ms, &last)
			s.mu.Unlock()
			lo = end
		}
	}
	return ms
}

// refused is the (limit, key, origin) whose slice Merge refused last.
type refused struct {
	set    bool
	slot   uint16
	origin uint16
	key    string
}

// apply merges the entries of one shard's group (s locked), in their order.
func (w *mergeWork) apply(s *shard, group []mergeRef, entries []Entry, nowMs int64, cs *clusterState, ms *MergeStats, last *refused) {
	for _, r := range group {
		e := &entries[r.i]
		info := &w.infos[r.info]
		if s.coord.resetsOf().erases(info.slot, e.Key, e.Start) {
			ms.Erased++ // counted before a reset of the key (reset.go)
			continue
		}
		tab := s.table(Limit{slot: info.slot, windowMs: info.windowMs})
		var st state
		found := tab.get(r.tag, e.Key, s.buf(0), false, &st)
		expired := false
		if found {
			expired = st.expire(nowMs-w.lag, info.windowMs)
		} else if !s.admit(nowMs, w.lag, tab) {
			ms.NoRoom++
			continue
		}
		full := last.set && last.slot == info.slot && last.origin == r.origin && last.key == e.Key
		changed, isRefused := st.merge(r.origin, e.Start, e.Count, info.perOrigin, full)
		if isRefused && !full {
			*last = refused{true, info.slot, r.origin, e.Key}
		}
		if changed {
			ms.Merged++
			// Anti-entropy re-sends this node's slices of the hot keys
			// (AppendHot): a key only the peers count has none, and
			// marking it would cost a map lookup here and a lookup of the
			// key at every round, to find nothing (most of an idle peer's
			// anti-entropy with 1,000 keys past their limit). Allow marks
			// it when this node counts it.
			if cs != nil && (r.origin == 0 || st.hasSync()) && cs.isHot(st.count(), info.max) {
				s.hot.mark(info.slot, e.Key, info.max)
			}
			if r.origin == 0 {
				// Our own slice from before a restart: closed to new requests.
				// The next AppendChanges sends it on to every peer: a peer that
				// restarted at the same time lost it too, and learns a third
				// node's slices only from that node (StateFor carries the
				// sender's and the receiver's own).
				st.set(flagClosed, true)
				st.restoredEnd = max(st.restoredEnd, uint32(e.Start-st.base)+1)
				if ref := (dirtyRef{slot: info.slot, key: e.Key}); len(s.restored) == 0 || s.restored[len(s.restored)-1] != ref {
					// A key's slices come together: list it once. The
					// list outlives the call, so it keeps a copy.
					ref.key = strings.Clone(ref.key)
					s.restored = append(s.restored, ref)
				}
			}
		} else if isRefused {
			ms.Refused++
		} else {
			ms.Unchanged++
		}
		if expired || changed {
			// The key's slices changed (merged, or expired and perhaps
			// moved to a new base): its block follows. A slice already
			// known (anti-entropy re-sends many) leaves the block as it
			// was, so nothing is written.
			s.store(info.slot, r.tag, e.Key, &st)
		}
	}
}

// mergeWork is one Merge call's working memory, pooled (Counter.merges) so
// that merging allocates nothing once warm.
type mergeWork struct {
	refs, sorted []mergeRef
	counts       []int32 // per shard, then where its entries start in sorted
	ends         []int   // where each shard's group of a batch ends in sorted
	infos        []mergeInfo
	slots        []*uint64 // touch's index slots
	blocks       []blockAt // touch's blocks
	lines        []*byte   // touch's block lines
	sink         uint64    // what touch read, so that the reads are not dropped
	lag          int64     // the counter's clock lead, ms (SetClockLead)
}

// mergeRef is an entry that Merge will apply, with what it needs to know
// of it beforehand.
type mergeRef struct {
	i      int32  // index in entries
	shard  uint32 // index in Counter.shards
	tag    uint32
	info   uint16 // index in mergeWork.infos
	origin uint16
}

// mergeInfo is what Merge needs of a limit.
type mergeInfo struct {
	slot      uint16
	windowMs  int64
	max       int64
	perOrigin int
}

// sortEntries fills w.sorted with the entries that name a registered limit
// (or one of a family, registered on first sight: family.go) and a live
// slice, grouped by shard and in their order within a shard, and
// counts the others in ms.
func (c *Counter) sortEntries(w *mergeWork, nowMs int64, entries []Entry, ms *MergeStats) {
	w.refs, w.infos = w.refs[:0], w.infos[:0]
	var (
		lastID   string
		lastOK   bool
		lastOrig string
		origin   uint16
		info     mergeInfo
	)
	for i := range entries {
		e := &entries[i]
		if i == 0 || e.Limit != lastID {
			lastID = e.Limit
			var li limitInfo
			info.slot, li, lastOK = c.lookupOrRegister(e.Limit)
			if lastOK {
				// perOrigin divides by the slice length: an unknown
				// limit's zero info has none.
				info.windowMs, info.max, info.perOrigin = li.windowMs, li.max, li.perOrigin()
				w.infos = append(w.infos, info)
			}
		}
		if !lastOK {
			ms.Unknown++
			continue
		}
		if e.Start <= nowMs-w.lag-info.windowMs || e.Start > nowMs+info.windowMs || e.Count == 0 {
			ms.Expired++
			continue
		}
		if len(w.refs) == 0 || e.Origin != lastOrig {
			lastOrig = e.Origin
			origin = c.originOf(e.Origin)
		}
		h := c.hash(e.Key)
		w.refs = append(w.refs, mergeRef{i: int32(i), shard: uint32(h & c.mask), tag: uint32(h >> 32), info: uint16(len(w.infos) - 1), origin: origin})
	}
	// A stable counting sort by shard.
	n := len(c.shards)
	if cap(w.counts) < n+1 {
		w.counts = make([]int32, n+1)
	}
	counts := w.counts[:n+1]
	clear(counts)
	for _, r := range w.refs {
		counts[r.shard+1]++
	}
	for i := 1; i <= n; i++ {
		counts[i] += counts[i-1]
	}
	if cap(w.sorted) < len(w.refs) {
		w.sorted = make([]mergeRef, len(w.refs))
	}
	w.sorted = w.sorted[:len(w.refs)]
	for _, r := range w.refs {
		w.sorted[counts[r.shard]] = r
		counts[r.shard]++
	}
}

// touchBatch is about how many entries Merge touches at once: enough for
// their cache misses to overlap, few enough that the shards it locks for
// them are not held long (a batch's merge takes some microseconds).
const touchBatch = 64

// touch reads, for a batch of entries whose shards are locked, first the
// index slot each key's probe starts at, then the block of each key it
// finds, so that the cache misses of all of them overlap; the merge that
// follows finds them in cache. Each read is a loop of its own over
// addresses gathered before it: a loop that does little besides the load
// keeps many of them in flight at once, where a probe's work around each
// load (the table, bounds, the tag) let only a few overlap.
//
// A block's first two cache lines hold its header, its key and its first
// slices; a key with more slices (one a few times over its limit, or
// checked every few seconds, has a slice each 5 s of its window) has more
// lines, which the merge's search of its slices would otherwise wait for
// one by one. Those are read last, once the headers, which say how long
// each block's slices are, are in; only in tables whose blocks are long
// on average (table.longBlocks): elsewhere the headers' reading costs
// more than the few lines it finds.
func (w *mergeWork) touch(shards []shard, batch []mergeRef) {
	w.slots = w.slots[:0]
	for _, r := range batch {
		if t := shards[r.shard].tableAt(w.infos[r.info].slot); t != nil && len(t.idx) > 0 {
			w.slots = append(w.slots, &t.idx[int(r.tag)&(len(t.idx)-1)])
		}
	}
	var x uint64
	for _, p := range w.slots {
		x += *p
	}
	w.blocks, w.lines = w.blocks[:0], w.lines[:0]
	for _, r := range batch {
		if t := shards[r.shard].tableAt(w.infos[r.info].slot); t != nil {
			if o, ok := t.blockOf(r.tag); ok {
				if t.longBlocks() {
					w.blocks = append(w.blocks, blockAt{&t.slab, o})
				}
				w.lines = append(w.lines, &t.slab.b[o], &t.slab.b[o+minBlock-1])
			}
		}
	}
	for _, p := range w.lines {
		x += uint64(*p)
	}
	w.lines = w.lines[:0]
	for _, at := range w.blocks {
		// The lines after the one minBlock reaches into, up to the end of
		// the slices, if the block reaches past it at all.
		next := (at.o+minBlock-1)&^(cacheLine-1) + cacheLine
		if at.o+unitsOf(at.slab.b[at.o+bClass])*8 <= next {
			continue
		}
		for end := at.slab.usedEnd(at.o); next < end; next += cacheLine {
			w.lines = append(w.lines, &at.slab.b[next])
		}
	}
	for _, p := range w.lines {
		x += uint64(*p)
	}
	w.sink += x
	// The pooled work must not keep a table's index or slab alive once a
	// resize or compaction has replaced it.
	clear(w.slots)
	clear(w.blocks)
	clear(w.lines)
}

// blockAt is where a block starts in a slab.
type blockAt struct {
	slab *slab
	o    int
}

// tableAt returns the shard's table for slot, or nil if there is none yet.
func (s *shard) tableAt(slot uint16) *table {
	if int(slot) < len(s.tables) {
		return &s.tables[slot]
	}
	return nil
}
