package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/limiterd/limiterd/counter"
)

// BenchmarkSyncTransport measures the sync traffic of in-process nodes at
// the design load: 5,000 checks/s per node (HS2 / HS4) over 200,000
// clients (HS1), limit 600/60 s (HS3), sync every 200 ms (HS5), anti-entropy
// every second. One iteration is one sync interval of load on every node,
// so run it with -benchtime Nx for N intervals (50x is 10 s):
//
//	go test ./cluster -run '^$' -bench SyncTransport -benchtime 50x
//	BENCH_NODES=8 go test ./cluster -run '^$' -bench SyncTransport/nodes=8 -benchtime 50x
//
// Reported per node and per second of wall time: bytes and messages sent
// (sync payload, each copy to each peer counted; memberlist's framing adds
// about 6 bytes per datagram), CPU of the whole process divided by the
// nodes (load generation and counting included: compare with "alone",
// the same load with no peers), and after the load stops and one
// anti-entropy interval passes: the share of sent messages received, and
// how many of 2,000 sampled keys still differ between nodes.
func BenchmarkSyncTransport(b *testing.B) {
	sizes := []int{3}
	if v, err := strconv.Atoi(os.Getenv("BENCH_NODES")); err == nil && v > 1 {
		sizes = []int{v}
	}
	for _, k := range sizes {
		for _, tc := range []struct {
			name     string
			alone    bool
			config   func(*Config)
			compress bool
		}{
			{name: "alone", alone: true},
			{name: "udp", config: func(c *Config) { c.SyncTransport = TransportUDP }},
			{name: "tcp", config: func(c *Config) { c.SyncTransport = TransportTCP }},
			{name: "udp-lzw", config: func(c *Config) { c.SyncTransport = TransportUDP }, compress: true},
			{name: "udp-aes", config: func(c *Config) {
				c.SyncTransport, c.GossipKey = TransportUDP, []byte("0123456789abcdef0123456789abcdef")
			}},
		} {
			b.Run(fmt.Sprintf("nodes=%d/%s", k, tc.name), func(b *testing.B) {
				benchSync(b, k, tc.alone, tc.compress, tc.config)
			})
		}
	}
}

func benchSync(b *testing.B, k int, alone, compress bool, config func(*Config)) {
	const (
		clients      = 200_000
		checksPerSec = 5_000
		interval     = 200 * time.Millisecond
		step         = 10 * time.Millisecond
		perStep      = checksPerSec * int(step/time.Millisecond) / 1000
	)
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(100000+i)
	}
	nw := newNetwork()
	o := nodeOpts{limit: 600, nw: nw, sync: interval, config: func(c *Config) {
		c.AntiEntropyInterval = time.Second
		if config != nil {
			config(c)
		}
	}}
	o.tune = func(mc *memberlist.Config) {
		// limiterd's memberlist timings (LAN), not the tests' fast ones: a
		// process that runs all the nodes on two cores must not see false
		// failures that the real deployment, a node per host, would not.
		lan := memberlist.DefaultLANConfig()
		mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = lan.ProbeInterval, lan.ProbeTimeout, lan.GossipInterval
		mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = lan.SuspicionMult, lan.SuspicionMaxTimeoutMult
		mc.PushPullInterval = 5 * time.Second // limiterd's (memberlistConfig)
		mc.IndirectChecks, mc.RetransmitMult, mc.TCPTimeout = lan.IndirectChecks, lan.RetransmitMult, lan.TCPTimeout
		mc.EnableCompression = compress
	}
	var nodes []*tnode
	if alone {
		for i := range k {
			nodes = append(nodes, startNode(b, fmt.Sprintf("n%d", i+1), o))
		}
	} else {
		nodes = startCluster(b, k, o)
	}
	for _, tn := range nodes {
		cc := counter.DefaultClusterConfig(tn.name)
		cc.Coordinated = false // every check decided locally, as the measurements were made
		cc.Nodes = k
		if err := tn.c.SetCluster(cc); err != nil { // the design's budget, as limiterd runs
			b.Fatal(err)
		}
	}
	defer func() {
		for _, tn := range nodes {
			tn.stop()
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var res [1]counter.Result
	sent0, recv0, bytes0, dropped0 := traffic(nodes)
	packets0, wire0 := nw.packets.Load(), nw.packetBytes.Load()+nw.streamBytes.Load()
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	next := start
	for range b.N {
		for range interval / step {
			for _, tn := range nodes {
				now := time.Now()
				for range perStep {
					_, _ = tn.c.Allow(now, keys[rng.IntN(clients)], 1, []counter.Limit{tn.lim}, res[:])
				}
			}
			next = next.Add(step)
			time.Sleep(time.Until(next))
		}
	}
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	sent, _, bytes, _ := traffic(nodes)
	packets, wire := nw.packets.Load(), nw.packetBytes.Load()+nw.streamBytes.Load()
	perNode := func(v uint64) float64 { return float64(v) / wall.Seconds() / float64(k) }
	b.ReportMetric(perNode(bytes-bytes0), "syncB/s/node")
	b.ReportMetric(perNode(sent-sent0), "msgs/s/node")
	b.ReportMetric(perNode(wire-wire0), "wireB/s/node")
	b.ReportMetric(perNode(packets-packets0), "datagrams/s/node")
	b.ReportMetric(cpu.Seconds()/wall.Seconds()/float64(k)*1000, "cpu-ms/s/node")

	// Let the last ticks and one anti-entropy round arrive, then compare
	// what was sent and received (heartbeats still in flight make this
	// approximate by a few messages).
	time.Sleep(interval + time.Second + 200*time.Millisecond)
	sent, recv, _, dropped := traffic(nodes)
	if sent > sent0 {
		b.ReportMetric(100*float64(recv-recv0)/float64(sent-sent0), "%received")
	}
	b.ReportMetric(float64(dropped-dropped0), "dropped")
	if !alone {
		differ := 0
		for i := range 2000 {
			key := keys[i*(clients/2000)]
			want := nodes[0].peek(key)
			for _, tn := range nodes[1:] {
				if tn.peek(key) != want {
					differ++
					break
				}
			}
		}
		b.ReportMetric(float64(differ), "keys-differ/2000")
	}
}

// traffic sums the nodes' sync counters.
func traffic(nodes []*tnode) (sent, received, bytes, dropped uint64) {
	for _, tn := range nodes {
		s := &tn.n.engine.Stats
		sent += s.MessagesSent.Load()
		received += s.MessagesReceived.Load()
		bytes += s.BytesSent.Load()
		dropped += tn.n.dropped.Load()
	}
	return sent, received, bytes, dropped
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
