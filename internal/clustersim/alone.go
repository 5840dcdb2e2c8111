package clustersim

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// Recording and replaying one node (Config.Record, Replay).
//
// A simulation runs every node in one process, so between two calls of one
// node the other N − 1 have evicted its state from the caches, and at 256
// nodes the process's heap is 256 nodes' heaps, so that page walks miss
// too. Every memory access of an engine then costs more the larger N is,
// which a node on a machine of its own never pays: the time Node.Times
// measures grows with N even where a node's work does not. Replayed alone,
// a node's engine time is what that node would spend on a machine of its
// own (BENCHMARKS.md, issue 20).
//
// The record is a stream, written as the simulation runs, so that it
// takes nothing from the heap the simulation measures: one record per
// input of the node, in the order the node took them in. A record is its
// kind, then its fields, integers as varints and byte strings with their
// length first:
//
//	'S' epoch ms                        the clocks' epoch (Start)
//	'U' at, peer                        Engine.PeerUp
//	'T' at                              Engine.Tick
//	'R' at, message                     Engine.Receive
//	'C' at, key, hits                   a check (Decider.Decide)
//	'A' at, expire at, late at,         what the network brought back for
//	    answers, late answers           one of its asks (a count, then each)
//	'D' allowed, decided                the check's decision
//	'E' checks                          the end (Finish), and the checks
//
// Times are true times (ms); the node's clock is applied on replay.
const (
	recStart    = 'S'
	recPeerUp   = 'U'
	recTick     = 'T'
	recReceive  = 'R'
	recCheck    = 'C'
	recAsk      = 'A'
	recDecision = 'D'
	recEnd      = 'E'
)

// recorder writes the record of node Node (Config.Record).
type recorder struct {
	node   int
	checks int64
	w      *bufio.Writer
	buf    []byte
	err    error // the first write error, returned by Finish
}

// on reports whether node is the one recorded.
func (r *recorder) on(node int) bool { return r != nil && r.node == node }

// begin starts a record of kind at true time at, if node is the one
// recorded; the caller adds the fields and flushes it.
func (r *recorder) begin(node int, kind byte, at int64) bool {
	if !r.on(node) {
		return false
	}
	r.buf = append(r.buf[:0], kind)
	r.int(at)
	return true
}

func (r *recorder) flushRecord() {
	if r.err == nil {
		_, r.err = r.w.Write(r.buf)
	}
	r.buf = r.buf[:0]
}

func (r *recorder) int(v int64)    { r.buf = binary.AppendVarint(r.buf, v) }
func (r *recorder) bytes(b []byte) { r.buf = append(binary.AppendUvarint(r.buf, uint64(len(b))), b...) }
func (r *recorder) string(s string) {
	r.buf = append(binary.AppendUvarint(r.buf, uint64(len(s))), s...)
}

// recordStart writes the epoch, before anything else.
func (s *Cluster) recordStart() {
	if r := s.rec; r != nil {
		r.buf = append(r.buf, recStart)
		r.int(s.epochMs)
		r.flushRecord()
	}
}

func (s *Cluster) recordPeerUp(node int, at int64, peer string) {
	if r := s.rec; r.begin(node, recPeerUp, at) {
		r.string(peer)
		r.flushRecord()
	}
}

func (s *Cluster) recordTick(node int, at int64) {
	if r := s.rec; r.begin(node, recTick, at) {
		r.flushRecord()
	}
}

func (s *Cluster) recordReceive(node int, at int64, msg []byte) {
	if r := s.rec; r.begin(node, recReceive, at) {
		r.bytes(msg)
		r.flushRecord()
	}
}

func (s *Cluster) recordCheck(node int, at int64, key string, hits int64) {
	if r := s.rec; r.begin(node, recCheck, at) {
		r.checks++
		r.string(key)
		r.int(hits)
		r.flushRecord()
	}
}

func (s *Cluster) recordAsk(node int, got askOutcome) {
	if r := s.rec; r.begin(node, recAsk, got.at) {
		r.int(got.expireAt)
		r.int(got.lateAt)
		for _, ms := range [][][]byte{got.answers, got.late} {
			r.int(int64(len(ms)))
			for _, m := range ms {
				r.bytes(m)
			}
		}
		r.flushRecord()
	}
}

func (s *Cluster) recordDecision(node int, d limiter.Decision) {
	if r := s.rec; r.on(node) {
		allowed := byte(0)
		if d.Allowed {
			allowed = 1
		}
		r.buf = append(r.buf, recDecision, allowed, byte(d.Decided))
		r.flushRecord()
	}
}

// receive hands msg to node i's engine at true time at, recorded.
func (s *Cluster) receive(i int, at int64, msg []byte) (engine.Received, error) {
	s.recordReceive(i, at, msg)
	n := s.nodes[i]
	return n.eng.Receive(s.clock(n, at), msg)
}

// finishRecord flushes the record and returns the first error writing it.
func (s *Cluster) finishRecord() error {
	if s.rec == nil {
		return nil
	}
	r := s.rec
	r.buf = append(r.buf, recEnd)
	r.int(r.checks)
	r.flushRecord()
	if r.err == nil {
		r.err = r.w.Flush()
	}
	if s.rec.err != nil {
		return fmt.Errorf("clustersim: writing the record of node-%d: %w", s.rec.node, s.rec.err)
	}
	return nil
}

// Replayed is what Replay ran.
type Replayed struct {
	// Engine is the node's engine time, measured as a simulation measures
	// it (Config.Timed) but for two things: the node's own asks count
	// their asking side only, and the asks of other nodes it answered are
	// among its receives; and its ticks and receives between two checks
	// are timed as one stretch, read from the record before they run, so
	// that neither the reading nor the clock (a system call, which would
	// swamp calls of a few hundred ns) is timed once a message.
	Engine EngineTime
	// Checks, Asks and Messages count the node's checks, its asks to
	// other nodes and the messages it received.
	Checks, Asks, Messages int
}

// ErrReplayDiffers is returned when a replay does not run what the
// recorded node ran: a decision came out otherwise, or the record ran out.
var ErrReplayDiffers = errors.New("clustersim: the replay differs from the recorded run")

// engineInput is a tick (msg nil) or a message of a record, read ahead.
type engineInput struct {
	at  int64
	msg []byte
	rcv bool
}

// Replay runs the record of node cfg.RecordNode (read from rec, as a
// simulation of cfg wrote it) again on that node alone, built as New
// builds it, with its engine timed. Every decision must come out as
// recorded, or Replay returns an error wrapping ErrReplayDiffers.
func Replay(cfg Config, rec io.Reader) (Replayed, error) {
	cfg.Record, cfg.Timed = nil, true
	if err := cfg.Validate(); err != nil {
		return Replayed{}, err
	}
	s := &Cluster{cfg: cfg, syncMs: cfg.Sync.Milliseconds(), latMs: cfg.Latency.Milliseconds()}
	rp := &replayer{s: s, r: &recordReader{r: bufio.NewReader(rec)}}
	n, err := s.newNode(cfg.RecordNode, rp, 0)
	if err != nil {
		return Replayed{}, err
	}
	s.nodes = []*Node{n}
	rp.n = n
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var (
		out   Replayed
		eng   EngineTime
		batch []engineInput // the ticks and messages read ahead
		arena []byte        // their messages' bytes, reused: Receive keeps none
	)
	// run runs the batch under one stopwatch.
	run := func() error {
		if len(batch) == 0 {
			return nil
		}
		w := s.startWatch()
		defer w.stop(&eng)
		for _, in := range batch {
			var err error
			if in.rcv {
				_, err = n.eng.Receive(s.clock(n, in.at), in.msg)
				if errors.Is(err, engine.ErrReplay) {
					err = nil // a duplicated hello (Config.Dup), as in deliverAt
				}
			} else {
				_, err = n.eng.Tick(s.clock(n, in.at))
			}
			if err != nil {
				return err
			}
		}
		batch, arena = batch[:0], arena[:0]
		return nil
	}
	rr := rp.r
	for {
		kind, err := rr.kind()
		if err == io.EOF {
			return out, fmt.Errorf("clustersim: replaying node-%d: %w: the record ends before its end", cfg.RecordNode, ErrReplayDiffers)
		}
		if kind != recTick && kind != recReceive && err == nil {
			err = run()
		}
		switch {
		case err != nil:
		case kind == recTick:
			batch = append(batch, engineInput{at: rr.int()})
		case kind == recReceive:
			at := rr.int()
			// Into the arena: a batch's messages are live together, and
			// garbage the replay made would be collected on the
			// engine's time.
			from := len(arena)
			if arena = rr.appendBytes(arena); rr.err != nil {
				break
			}
			batch = append(batch, engineInput{at: at, msg: arena[from:], rcv: true})
			out.Messages++
		case kind == recEnd:
			if checks := rr.int(); rr.err == nil && checks != int64(out.Checks) {
				err = fmt.Errorf("%w: %d checks replayed, %d recorded", ErrReplayDiffers, out.Checks, checks)
			} else if _, err = rr.kind(); err == io.EOF {
				out.Engine, out.Asks = eng.add(n.times.Ask), rp.asks
				return out, nil
			} else {
				err = fmt.Errorf("%w: records after the end", ErrReplayDiffers)
			}
		case kind == recStart:
			s.epochMs = rr.int()
		case kind == recPeerUp:
			at, peer := rr.int(), rr.string()
			if rr.err == nil {
				_, err = n.eng.PeerUp(s.clock(n, at), peer)
			}
		case kind == recCheck:
			at, key, hits := rr.int(), rr.string(), rr.int()
			if rr.err != nil {
				break
			}
			s.now = at
			if err = n.dec.Decide(context.Background(), cfg.request(key, hits), &n.res); err != nil {
				break
			}
			err = rp.decided(out.Checks, key, at)
			out.Checks++
		default:
			err = fmt.Errorf("%w: a record of kind %q where an input was due", ErrReplayDiffers, kind)
		}
		if err == nil {
			err = cmpErr(rr.err, rp.err)
		}
		if err != nil {
			return out, fmt.Errorf("clustersim: replaying node-%d: %w", cfg.RecordNode, err)
		}
	}
}

// cmpErr returns the first of errs that is not nil.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// replayer is the recorded node's decision.Coordinator in a Replay: the
// engine's asking side, as in a simulation (Cluster.finishAsk), with
// what the network brought back read from the record.
type replayer struct {
	s    *Cluster
	n    *Node
	r    *recordReader
	asks int
	err  error
}

// Coordinate is decision.Coordinator's.
func (rp *replayer) Coordinate(_ context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error) {
	s, n := rp.s, rp.n
	w := s.startWatch()
	defer w.stop(&n.times.Ask)
	asked, err := n.eng.Ask(t, ask, results)
	switch {
	case asked.Local:
		return asked.Decision.Allowed, err == nil, err
	case asked.Alone:
		return false, false, fmt.Errorf("clustersim: replay: every node above %s missed its asks", n.name)
	case err != nil:
		return false, false, err
	}
	got, err := rp.r.ask()
	if err != nil {
		rp.err = err
		return false, false, err
	}
	rp.asks++
	allowed, _, err = s.finishAsk(n, asked, got, results, asked.Out.To)
	return allowed, false, err
}

// decided reads check i's recorded decision and compares the replay's.
func (rp *replayer) decided(i int, key string, at int64) error {
	kind, err := rp.r.kind()
	if err != nil || kind != recDecision {
		return fmt.Errorf("%w: check %d of %q at %d ms: a record of kind %q (%v) where its decision was due", ErrReplayDiffers, i, key, at, kind, err)
	}
	allowed, decided := rp.r.byte() == 1, limiter.Decider(rp.r.byte())
	if got := rp.n.res.Decision; rp.r.err == nil && (got.Allowed != allowed || got.Decided != decided) {
		return fmt.Errorf("%w: check %d of %q at %d ms decided %v by %v, recorded %v by %v", ErrReplayDiffers, i, key, at, got.Allowed, got.Decided, allowed, decided)
	}
	return rp.r.err
}

// recordReader reads a record; its first error sticks (err).
type recordReader struct {
	r   *bufio.Reader
	err error
}

// kind reads a record's kind: io.EOF at the end of the record.
func (rr *recordReader) kind() (byte, error) {
	if rr.err != nil {
		return 0, rr.err
	}
	b, err := rr.r.ReadByte()
	if err != nil && err != io.EOF {
		rr.err = err
	}
	return b, err
}

func (rr *recordReader) byte() byte {
	if rr.err != nil {
		return 0
	}
	b, err := rr.r.ReadByte()
	rr.fail(err)
	return b
}

func (rr *recordReader) int() int64 {
	if rr.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(rr.r)
	rr.fail(err)
	return v
}

func (rr *recordReader) bytes() []byte { return rr.appendBytes(nil) }

// appendBytes reads a byte string and appends it to buf. When buf must
// grow, the bytes before it stay where they were (append's rule): what
// points into them stays valid.
func (rr *recordReader) appendBytes(buf []byte) []byte {
	if rr.err != nil {
		return buf
	}
	n, err := binary.ReadUvarint(rr.r)
	if rr.fail(err); rr.err != nil {
		return buf
	}
	if n > 1<<26 {
		rr.fail(fmt.Errorf("a byte string of %d bytes", n))
		return buf
	}
	buf = slices.Grow(buf, int(n))
	_, err = io.ReadFull(rr.r, buf[len(buf):len(buf)+int(n)])
	rr.fail(err)
	return buf[:len(buf)+int(n)]
}

func (rr *recordReader) string() string { return string(rr.bytes()) }

// ask reads an ask's record.
func (rr *recordReader) ask() (askOutcome, error) {
	if kind, err := rr.kind(); err != nil || kind != recAsk {
		return askOutcome{}, fmt.Errorf("%w: a record of kind %q (%v) where an ask's was due", ErrReplayDiffers, kind, err)
	}
	got := askOutcome{at: rr.int(), expireAt: rr.int(), lateAt: rr.int()}
	for _, ms := range []*[][]byte{&got.answers, &got.late} {
		for range rr.int() {
			*ms = append(*ms, rr.bytes())
		}
	}
	return got, rr.err
}

// fail keeps err, an unexpected end of the record if it is io.EOF.
func (rr *recordReader) fail(err error) {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if rr.err == nil && err != nil {
		rr.err = fmt.Errorf("%w: reading the record: %w", ErrReplayDiffers, err)
	}
}
