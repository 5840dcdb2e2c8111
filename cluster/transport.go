package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"

	"github.com/limiterd/limiterd/cluster/engine"
)

// maxDatagram is the largest UDP payload: the read buffer's size.
const maxDatagram = 65536

// udpRecvBuf is the socket receive buffer asked for (as memberlist's own
// transport does): a tick's datagrams from every peer arrive together.
const udpRecvBuf = 2 << 20

// transport is memberlist's network transport for limiterd: TCP and UDP on
// one address, as memberlist.NetTransport, with one difference that matters
// at limiterd's rates: NetTransport allocates a fresh 64 KiB buffer for every
// datagram it reads (memberlist v0.7.0), which at a few thousand datagrams a
// second per node was 14 % of a node's CPU in allocation alone, plus the
// garbage collection it drove (docs/real-cluster.md). This one reads into
// one buffer and hands memberlist a copy of the datagram's actual size, or
// a plain user message's payload to the Node (deliverUsers).
type transport struct {
	bindIP   net.IP
	port     int
	tcp      *net.TCPListener
	udp      *net.UDPConn
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	guards   chan struct{}     // one token a stream whose header is being read
	streams  chan struct{}     // one token an inbound stream open, header read or not
	guard    streamGuardConfig // what an inbound stream's header may claim
	refused  atomic.Uint64     // inbound streams closed unread
	logger   *log.Logger

	// user, once set (deliverUsers), takes the datagrams that are plain
	// user messages, in memberlist's place (readDatagrams).
	user  atomic.Pointer[func([]byte)]
	users atomic.Uint64 // datagrams handed to it

	shutdown atomic.Bool
	done     chan struct{} // closed by Shutdown: no one may read the channels any more
	wg       sync.WaitGroup
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// newTransport listens on host:port over TCP and UDP. With port 0 it takes
// a free TCP port and the same UDP port, trying again if another process
// takes that UDP port in between.
func newTransport(host string, port int, logger *log.Logger) (*transport, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("cluster: bind address %q is not an IP address", host)
	}
	var err error
	for range 10 {
		var t *transport
		if t, err = listen(ip, port, logger); err == nil {
			t.wg.Add(2)
			go t.readDatagrams()
			go t.acceptStreams()
			return t, nil
		}
		if port != 0 {
			break
		}
	}
	return nil, err
}

func listen(ip net.IP, port int, logger *log.Logger) (*transport, error) {
	tcp, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("cluster: listen on TCP %s: %w", net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	port = tcp.Addr().(*net.TCPAddr).Port
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		_ = tcp.Close()
		return nil, fmt.Errorf("cluster: listen on UDP %s: %w", net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	// Ask for a large receive buffer, settling for less where the system
	// caps it; the default (200 KiB or so) overflows under a tick's burst.
	for size := udpRecvBuf; size >= 64<<10; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			break
		}
	}
	return &transport{
		bindIP: ip, port: port, tcp: tcp, udp: udp, logger: logger,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		guards:   make(chan struct{}, maxGuardedStreams),
		streams:  make(chan struct{}, maxInboundStreams),
		guard:    streamGuardConfig{maxMessageBytes: engine.DefaultDecodeLimits().MaxMessageBytes, maxNodes: 1 << 12, timeout: 5 * time.Second},
		done:     make(chan struct{}),
	}, nil
}

// Port returns the port bound, TCP and UDP.
func (t *transport) Port() int { return t.port }

// FinalAdvertiseAddr returns ip:port when ip is given, else the bound
// address (a private IP of this host when bound to all addresses, as
// memberlist.NetTransport picks it) and the bound port.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip != "" {
		addr := net.ParseIP(ip)
		if addr == nil {
			return nil, 0, fmt.Errorf("cluster: advertise address %q is not an IP address", ip)
		}
		if ip4 := addr.To4(); ip4 != nil {
			addr = ip4
		}
		return addr, port, nil
	}
	if !t.bindIP.IsUnspecified() {
		return t.bindIP, t.port, nil
	}
	priv, err := sockaddr.GetPrivateIP()
	if err != nil {
		return nil, 0, fmt.Errorf("cluster: find a private IP to advertise: %w", err)
	}
	addr := net.ParseIP(priv)
	if addr == nil {
		return nil, 0, errors.New("cluster: no private IP address to advertise; set the advertise address")
	}
	return addr, t.port, nil
}

// WriteTo sends one datagram to addr (HOST:PORT). Once the transport is
// shut down it drops the datagram and reports no error: memberlist shuts
// its transport down before it stops its gossip and probe timers, and each
// send those make in between would otherwise log an error line at every
// clean stop ("use of closed network connection"). A datagram may be lost
// anyway, and nothing of a stopped node waits for it.
func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.shutdown.Load() {
		return time.Now(), nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return time.Time{}, err
	}
	// The send time is taken after the write, as close to the I/O as
	// memberlist expects for its RTT estimates. It is the real clock, not
	// Config.Now: memberlist compares it with its own time.Now.
	_, err = t.udp.WriteTo(b, ua)
	if err != nil && t.shutdown.Load() {
		err = nil // closed under the write by Shutdown
	}
	return time.Now(), err
}

// WriteToAddress sends one datagram to a.Addr.
func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

// PacketCh delivers received datagrams.
func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout opens a stream to addr.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.Dial("tcp", addr)
}

// DialAddressTimeout opens a stream to a.Addr.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}

// StreamCh delivers accepted streams.
func (t *transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown closes the listeners and waits for their goroutines.
func (t *transport) Shutdown() error {
	if t.shutdown.Swap(true) {
		return nil
	}
	close(t.done)
	errTCP, errUDP := t.tcp.Close(), t.udp.Close()
	t.wg.Wait()
	return errors.Join(errTCP, errUDP)
}

// deliverUsers has the datagrams that are plain user messages (userPayload)
// handed to deliver, on the reading goroutine, rather than to memberlist.
// Handed to memberlist, a datagram goes from this goroutine to its packet
// listener, and a user message from there to its packet handler, which
// calls the delegate (NotifyMsg): three goroutines woken for each ask and
// answer, on a coordinator that may be idle between them. Its steps on the way (label,
// decryption, checksum) are either absent from a plain user message or
// done here (the checksum), and it does nothing else with one. Only for a
// node without a label or gossip keys: their datagrams are memberlist's to
// unwrap. deliver gets a copy of the payload, as memberlist's delegate
// does, and is called for each datagram read after deliverUsers returns.
func (t *transport) deliverUsers(deliver func([]byte)) { t.user.Store(&deliver) }

// userPayload returns the payload of a datagram that memberlist hands its
// delegate whole, a user message: [userMsg, payload], or the same after a
// checksum header, [hasCrc, CRC-32 (IEEE, big-endian) of the rest,
// userMsg, payload], as memberlist sends to peers of protocol 5 and up.
// Anything else (memberlist's own messages, compound, compressed,
// labelled or encrypted ones, a checksum that does not match) is not one.
func userPayload(b []byte) ([]byte, bool) {
	if len(b) > 5 && b[0] == mlHasCrcMsg {
		if crc32.ChecksumIEEE(b[5:]) != binary.BigEndian.Uint32(b[1:5]) {
			return nil, false // memberlist logs and drops it
		}
		b = b[5:]
	}
	if len(b) == 0 || b[0] != mlUserMsg {
		return nil, false
	}
	return b[1:], true
}

// readDatagrams reads datagrams into one buffer and hands memberlist a
// right-sized copy of each, stamped as close to the read as possible (on
// the real clock, which memberlist's probes compare it with), or the
// payload of a plain user message to the deliverUsers function.
func (t *transport) readDatagrams() {
	defer t.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		at := time.Now()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			t.logger.Printf("[ERR] cluster: reading a UDP datagram: %v", err)
			continue
		}
		if n < 1 {
			continue // memberlist needs at least its message-type byte
		}
		if deliver := t.user.Load(); deliver != nil {
			if p, ok := userPayload(buf[:n]); ok {
				t.users.Add(1)
				(*deliver)(append([]byte(nil), p...))
				continue
			}
		}
		select {
		case t.packetCh <- &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: from, Timestamp: at}:
		case <-t.done:
			return
		}
	}
}

// acceptStreams accepts TCP connections, backing off on errors (a full
// file table) from 5 ms up to 1 s.
func (t *transport) acceptStreams() {
	defer t.wg.Done()
	const maxDelay = time.Second
	var delay time.Duration
	for {
		conn, err := t.tcp.AcceptTCP()
		if err != nil {
			if t.shutdown.Load() {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), maxDelay)
			t.logger.Printf("[ERR] cluster: accepting a TCP connection: %v", err)
			time.Sleep(delay)
			continue
		}
		delay = 0
		// At most maxInboundStreams are open at once (each holds a
		// goroutine of memberlist's and a file descriptor until it is
		// done), and their header is read before memberlist sees them (it
		// would allocate what the header claims first), on a goroutine of
		// its own so that a slow sender holds up no other, at most
		// maxGuardedStreams at once. Past either, streams are closed.
		select {
		case t.streams <- struct{}{}:
		default:
			t.refused.Add(1)
			_ = conn.Close()
			continue
		}
		select {
		case t.guards <- struct{}{}:
		default:
			t.refused.Add(1)
			_ = conn.Close()
			<-t.streams
			continue
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer func() { <-t.guards }()
			g, err := guardStream(conn, t.guard, func() { <-t.streams })
			if err != nil {
				t.refused.Add(1)
				t.logger.Printf("[WARN] cluster: closing an inbound stream from %s: %v", conn.RemoteAddr(), err)
				_ = conn.Close()
				<-t.streams
				return
			}
			select {
			case t.streamCh <- g:
			case <-t.done:
				_ = g.Close()
			}
		}()
	}
}

// maxGuardedStreams caps the inbound streams whose header is being read.
const maxGuardedStreams = 64

// maxInboundStreams caps the inbound streams open at once. A node opens a
// stream per reliable message (catch-up chunks, hellos, memberlist's
// push/pull), and closes it once sent; 256 is far above what a cluster of
// dozens of nodes has open, and bounds the goroutines and descriptors a
// flood of connections can hold.
const maxInboundStreams = 256
