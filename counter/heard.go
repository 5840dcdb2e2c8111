package counter

// What a node hears of a routed key's total (ClusterConfig.Routing).
//
// A node other than a routed key's coordinator counts of it only what it
// admitted itself: the others' changes go to the coordinator alone. The
// coordinator's answer to an ask carries its count of the whole window
// (Result.Count, merged from every node's changes), so the asker keeps
// what that count held beyond its own (heardCount) for a slice length.
// It serves one decision only: a check that the budget decides because no
// answer came in time (AllowFallback) is first judged against the
// node's own count plus the others' as last heard, as a check on a
// broadcast limit is judged against the node's merged count, instead of
// against its own count alone. Without it, a node whose asks keep getting
// lost (a lossy link to the coordinator, a cut one way) admitted a floor
// every sync interval of a key whose window the others had already filled
// (docs/faults.md, "On routed sync").
//
// The figure is never used where a decision must be exact: a check with
// an answer is decided by the coordinator, and a check at the margin
// asks; only the budget, which is not exact (doc.go), reads it. It can be
// off both ways. What the others admitted after the answer is missing
// (the budget's floor and the coordinator's next answers bound that, as
// a stale merged count is bounded on a broadcast limit); what left the
// window since is still in it, at most a slice length's worth, which is
// why it is kept no longer (and never past the coordinator's Reset, when
// all it counted has left).

// heardCount is what the coordinator of a routed (limit, key) said, in
// its last answer, the other nodes had admitted in the window: others,
// to be added to this node's own count until until (unix ms, this node's
// clock; 0: nothing heard).
type heardCount struct {
	others uint32
	until  int64
}

// heard returns the others' count last heard for k's routed key, 0 when
// none is known at now.
func (k *keyCoord) heard(now int64) int64 {
	if k == nil || k.heardOf.until <= now {
		return 0
	}
	return int64(k.heardOf.others)
}

// hear records on ref's record what the coordinator's answer at now said
// beyond this node's own count: total is the coordinator's count of the
// window, own this node's, validMs how long the figure is kept. A record
// is made for it only while the shard holds fewer than maxLeases, so that
// memory stays bounded whatever keys are asked about (past it, the budget
// decides as it did before this existed).
func (cs *coordState) hear(ref dirtyRef, now, total, own, validMs int64) {
	if validMs <= 0 {
		return
	}
	k := cs.lookup(ref)
	if k == nil {
		if len(cs.keys) >= maxLeases {
			return
		}
		k = cs.upsert(ref)
	}
	k.heardOf = heardCount{others: uint32(min(max(total-own, 0), MaxLimit)), until: now + validMs}
}

// hearResults records, for each routed limit of a check, the others'
// count in the coordinator's results coord (s locked, tag key's hash tag):
// against own[i], this node's own count when the coordinator decided, or,
// with own nil, this node's count at now.
func (c *Counter) hearResults(s *shard, tag uint32, cs *clusterState, now int64, key string, limits []Limit, coord []Result, own []int64) {
	if cs == nil {
		return
	}
	for i, l := range limits {
		if i >= len(coord) || !cs.routed(l.max, c.tolPPM) {
			continue
		}
		if s.coord == nil {
			s.coord = &coordState{}
		}
		var o int64
		if own != nil {
			o = own[i]
		} else {
			o = s.liveCount(l, tag, key, now-c.lagMs())
		}
		valid := min(l.sliceMs, coord[i].Reset.Milliseconds())
		s.coord.hear(dirtyRef{slot: l.slot, key: key}, now, coord[i].Count, o, valid)
	}
}

// liveCount returns what (l, key) counts in its window at now, without
// changing its state (s locked).
func (s *shard) liveCount(l Limit, tag uint32, key string, now int64) int64 {
	var st state
	if !s.table(l).get(tag, key, s.buf(0), false, &st) {
		return 0
	}
	return st.liveCount(now, l.windowMs)
}
