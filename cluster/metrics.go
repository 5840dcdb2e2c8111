package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster/engine"
)

// collector reads the node's state at scrape time. The per-peer series
// exist only for peers that are alive or suspect and have sent something,
// so they come and go with the membership and their label values are
// bounded by it.
type collector struct {
	n *Node

	members, health, messages, bytes, decodeErrors, versionMismatches, notMember, replays, stale, skewed, deferred, refused, dropped, entries, lag, offset, lead, delay, late, mergeFull *prometheus.Desc
	asks, expired, alone, failedOver, notices                                                                                                                                            *prometheus.Desc
}

func newCollector(n *Node) *collector {
	return &collector{
		n: n,
		members: prometheus.NewDesc("limiterd_cluster_members",
			"Members of the cluster by state (alive, suspect, dead, left), this node included. Dead and departed members are forgotten after an hour.",
			[]string{"state"}, nil),
		health: prometheus.NewDesc("limiterd_cluster_health_score",
			"memberlist's health score of this node: 0 is healthy; higher means it is missing probe deadlines (overloaded or cut off).",
			nil, nil),
		messages: prometheus.NewDesc("limiterd_sync_messages_total",
			"Sync messages (deltas, anti-entropy, catch-up, hello) by direction (sent, received); a message sent to k peers counts k times.",
			[]string{"direction"}, nil),
		bytes: prometheus.NewDesc("limiterd_sync_bytes_total",
			"Bytes of sync messages by direction (sent, received), before memberlist's framing and encryption.",
			[]string{"direction"}, nil),
		decodeErrors: prometheus.NewDesc("limiterd_sync_decode_errors_total",
			"Cluster messages dropped because they were malformed or oversized: corruption, garbage on the cluster port, or a forgery.",
			nil, nil),
		versionMismatches: prometheus.NewDesc("limiterd_sync_version_mismatches_total",
			"Cluster messages dropped because they were of a wire version this node does not decode: a peer of another release, mid-upgrade (README, Cluster).",
			nil, nil),
		notMember: prometheus.NewDesc("limiterd_sync_not_member_messages_total",
			"Cluster messages dropped before any work because their sender is not a member (forged, or from another cluster without a gossip key).",
			nil, nil),
		replays: prometheus.NewDesc("limiterd_sync_replayed_messages_total",
			"Hellos and coordinator asks dropped as replays of a captured message: a hello sent no later than one answered already (each would cost a full state reply), an ask decided already (each would be granted again).",
			nil, nil),
		stale: prometheus.NewDesc("limiterd_sync_stale_messages_total",
			"Cluster messages dropped because they were sent (on the sender's clock) more than 10 s before they arrived: replays of captured messages, or a peer whose clock is that far behind (see limiterd_cluster_clock_offset_seconds).",
			nil, nil),
		skewed: prometheus.NewDesc("limiterd_sync_skewed_messages_total",
			"Cluster messages of a peer whose clock is off by more than -max-clock-offset (limiterd_cluster_clock_offset_seconds): sync messages whose slices were not merged (limiterd_sync_entries_total{result=\"skewed\"}) and asks answered undecided. The peer stays a member; the two count each other's requests as across a partition until its clock is back.",
			nil, nil),
		deferred: prometheus.NewDesc("limiterd_sync_deferred_states_total",
			"Full-state transfers (catch-ups, hello replies) held back by their rate limits (one per peer per rejoin interval, 16 in all) and sent later: many mean flapping peers or forged hellos.",
			nil, nil),
		refused: prometheus.NewDesc("limiterd_cluster_streams_refused_total",
			"Inbound cluster streams closed unread: a header claiming more than the decode limit, none within 5 s, or more streams open or being read than allowed.",
			nil, nil),
		dropped: prometheus.NewDesc("limiterd_sync_dropped_messages_total",
			"Sync messages not sent: the peer's queue was full or the send failed.",
			nil, nil),
		entries: prometheus.NewDesc("limiterd_sync_entries_total",
			"Received slice entries by result: merged (raised a count), ignored (already known, expired, unknown limit, or no room), refused (forged: a third node's slices, or more slices of a key than its origin's window can hold) or skewed (not merged: their origin's clock is off by more than -max-clock-offset).",
			[]string{"result"}, nil),
		lag: prometheus.NewDesc("limiterd_sync_merge_lag_seconds",
			"Age of the last sync message from each live peer: a peer whose lag exceeds a few sync intervals is not being heard.",
			[]string{"peer"}, nil),
		offset: prometheus.NewDesc("limiterd_cluster_clock_offset_seconds",
			"Each live peer's clock minus this node's, estimated from its last message (one-way delay included). Skew shifts slice boundaries between nodes; see the counter's documentation.",
			[]string{"peer"}, nil),
		lead: prometheus.NewDesc("limiterd_cluster_clock_lead_seconds",
			"How far this node's clock runs ahead of its peers', at least, as the peers that ask it about their checks measure it (the least of their reports of the last 10 s, at most -max-clock-offset): this node judges every window that much later, so that it does not let its peers' slices leave before their own clocks do. 0 on a clock that is not ahead.",
			nil, nil),
		delay: prometheus.NewDesc("limiterd_sync_delta_delay_seconds",
			"How much later each delta message of a peer was merged (its arrival, plus any wait in this node's merge queue) than the fastest of that peer's messages of the last second or two: its delay less theirs, the clocks' offset cancelled, so at most its delivery time after the sender's tick (less the fastest message's, well under a millisecond on a LAN). The 1.1 x bound assumes every delta arrives within -sync-delivery-grace of its tick (limiterd_sync_late_deltas_total).",
			nil, nil),
		late: prometheus.NewDesc("limiterd_sync_late_deltas_total",
			"Delta messages merged later than -sync-delivery-grace after their sender's tick, by limiterd_sync_delta_delay_seconds. The 1.1 x bound assumes none does: while one is on its way its sender may admit unseen more than the bound counts. A steady rate says the grace is too short for this network or this load (raise -sync-delivery-grace, or -sync-interval).",
			nil, nil),
		mergeFull: prometheus.NewDesc("limiterd_sync_merge_queue_full_total",
			"Sync messages merged on memberlist's receiving goroutine, ahead of the asks and answers behind them, because the queue of messages waiting to be merged (1,024) was full: this node merges its peers' changes more slowly than they come, and its checks' asks may miss their deadline.",
			nil, nil),
		asks: prometheus.NewDesc("limiterd_coordinator_asks_total",
			"Checks at the margin this node sent to another node, by whom: the key's coordinator (first), or the next node on the ring because the coordinator missed its last asks (runner_up); checks asked again because no answer came within half the deadline (retry, to either); and checks of keys whose every node above this one missed its asks, sent through the next node, which passes them on if it hears the coordinator (around).",
			[]string{"to"}, nil),
		expired: prometheus.NewDesc("limiterd_coordinator_asks_expired_total",
			"Asks this node gave up without an answer by the deadline (decided by the budget), by the peer asked. Three in a row to one peer, or one after a second of its silence, fail it over.",
			[]string{"peer"}, nil),
		alone: prometheus.NewDesc("limiterd_coordinator_skipped_total",
			"Checks at the margin decided by the budget at once, without asking: every node above this one for the key had missed its asks, and no node was there to carry the ask around to them.",
			nil, nil),
		failedOver: prometheus.NewDesc("limiterd_coordinator_failed_over_peers",
			"Live peers this node currently passes over as coordinators: they missed their last asks, here or as a peer's silence notice said, and have sent nothing since; or their clock is ahead of ours beyond -max-clock-offset.",
			nil, nil),
		notices: prometheus.NewDesc("limiterd_coordinator_silence_notices_total",
			"Silence notices: sent, once to every peer, when this node failed a coordinator over by its own misses; received from peers that did; told, the coordinators failed over here on a peer's notice.",
			[]string{"notice"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.members, c.health, c.messages, c.bytes, c.decodeErrors, c.versionMismatches, c.notMember, c.replays, c.stale, c.skewed, c.deferred, c.refused, c.dropped, c.entries, c.lag, c.offset, c.lead, c.delay, c.late, c.mergeFull, c.asks, c.expired, c.alone, c.failedOver, c.notices} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	st := n.status(n.now())
	byState := map[string]int{"alive": 0, "suspect": 0, "dead": 0, "left": 0}
	for _, m := range st.Members {
		byState[m.State]++
		if m.LastDeltaAgeMs != nil && (m.State == "alive" || m.State == "suspect") {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(*m.LastDeltaAgeMs)/1e3, m.Name)
			ch <- prometheus.MustNewConstMetric(c.offset, prometheus.GaugeValue, float64(*m.ClockOffsetMs)/1e3, m.Name)
		}
	}
	for state, k := range byState {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(k), state)
	}
	ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, float64(n.ml.GetHealthScore()))
	ch <- prometheus.MustNewConstMetric(c.lead, prometheus.GaugeValue, n.c.ClockLead().Seconds())
	s := &n.engine.Stats
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.messages, s.MessagesSent.Load(), "sent")
	counter(c.messages, s.MessagesReceived.Load(), "received")
	counter(c.bytes, s.BytesSent.Load(), "sent")
	counter(c.bytes, s.BytesReceived.Load(), "received")
	counter(c.decodeErrors, s.DecodeErrors.Load())
	counter(c.versionMismatches, s.VersionMismatches.Load())
	counter(c.notMember, s.NotMember.Load())
	counter(c.replays, s.Replays.Load())
	counter(c.stale, s.Stale.Load())
	counter(c.skewed, s.SkewedMessages.Load())
	counter(c.deferred, s.StatesDeferred.Load())
	counter(c.refused, n.transport.refused.Load())
	counter(c.dropped, n.dropped.Load())
	atMost, count, sumMs := s.DeltaDelays.Snapshot()
	buckets := make(map[float64]uint64, len(atMost))
	for i, ms := range engine.DelayBoundsMs() {
		buckets[float64(ms)/1e3] = atMost[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.delay, count, float64(sumMs)/1e3, buckets)
	counter(c.late, s.LateDeltas.Load())
	counter(c.mergeFull, n.merges.full.Load())
	counter(c.entries, s.EntriesMerged.Load(), "merged")
	counter(c.entries, s.EntriesIgnored.Load(), "ignored")
	counter(c.entries, s.EntriesRefused.Load(), "refused")
	counter(c.entries, s.EntriesSkewed.Load(), "skewed")
	counter(c.asks, s.AsksToCoordinator.Load(), "first")
	counter(c.asks, s.AsksToRunnerUp.Load(), "runner_up")
	counter(c.asks, s.AsksRetried.Load(), "retry")
	counter(c.asks, s.AsksAround.Load(), "around")
	for name, p := range n.engine.Peers() {
		counter(c.expired, p.AsksExpired, name)
	}
	counter(c.alone, s.AsksAlone.Load())
	counter(c.notices, s.SilenceNoticesSent.Load(), "sent")
	counter(c.notices, s.SilenceNoticesReceived.Load(), "received")
	counter(c.notices, s.FailoversTold.Load(), "told")
	ch <- prometheus.MustNewConstMetric(c.failedOver, prometheus.GaugeValue, float64(len(n.engine.FailedOver(n.now()))))
}
