package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Patterns, spreads and clients, as limitload's flags spell them.
// PatternStreams has no flag: Config.Streams sets it.
const (
	PatternSteady       = "steady"
	PatternEdgeBurst    = "edge-burst"
	PatternIntermittent = "intermittent"
	PatternRandom       = "random"
	PatternKeys         = "keys"
	PatternStreams      = "streams"

	SpreadRandom        = "random"
	SpreadRoundRobin    = "round-robin"
	SpreadKeyRoundRobin = "key-round-robin"
	SpreadLCG           = "lcg"

	ClientRaw  = "raw"
	ClientHTTP = "http"
)

// seedWindow is the window of the seed design study's patterns; a shorter
// --window scales every instant of them by window/seedWindow.
const seedWindow = 60 * time.Second

// seedLCGSeed is the seed design study's generator seed (hiz/dagitik.mjs);
// it is the default --seed, so --spread lcg picks the seed's nodes.
const seedLCGSeed = 20260730

// maxKeyBytes is limiterd's limit on a key (limiter.MaxKeyBytes); keys
// limitload builds must stay under it.
const maxKeyBytes = 1024

// Bounds that keep one run's memory and schedule finite whatever the flags.
const (
	maxTargets   = 1024
	maxConns     = 4096
	maxRequests  = 100_000_000 // scheduled requests of one run
	maxKeysFlag  = 100_000_000
	maxRateFlag  = 10_000_000
	maxWorstKeys = 10_000
	// maxKeyRoundRobin bounds key-round-robin's counters (2 bytes a key).
	maxKeyRoundRobin = 10_000_000
)

// Config is one run. limitload's flags fill every field but those under
// "Library only", which a program (the e2e tests) sets. Validate must pass
// before Run uses it.
type Config struct {
	// Targets are the nodes' HTTP addresses, HOST:PORT, at least one.
	// Validate resolves names and, without AllowRemote, refuses any address
	// outside 127.0.0.0/8 and ::1.
	Targets []string
	// AllowRemote lifts the loopback guard.
	AllowRemote bool
	// Spread picks each request's target: random (uniform, from Seed),
	// round-robin, key-round-robin (each key through the targets in turn,
	// key k from target k mod the targets: a client that asks the next
	// node each time; a counter per key), or lcg (the seed study's 32-bit
	// LCG seeded with Seed, so the default seed reproduces its node
	// choices).
	Spread string

	// Pattern is the arrival pattern: steady, edge-burst, intermittent,
	// random, keys (see patterns.go), or streams (Streams).
	Pattern string
	// Limit and Window are the server's rule for the keys driven: at most
	// Limit requests in any Window. The accuracy analysis judges against
	// them, and the seed's patterns are laid out from them.
	Limit  int
	Window time.Duration
	// Factor is steady's rate as a multiple of the limit rate Limit/Window.
	Factor float64
	// Rate is the total requests per second of random and keys (0 with
	// random: Factor x the limit rate).
	Rate float64
	// Keys is the number of distinct keys of the keys pattern.
	Keys int
	// ZipfS is the keys pattern's skew: key k (from 0) is drawn with
	// probability proportional to 1/(k+1)^ZipfS; 0 draws uniformly.
	ZipfS float64
	// Duration bounds the schedule; 0 is the pattern's own length (3
	// windows for steady and random, the seed's 180 s scaled; 60 s for
	// keys; the last burst for edge-burst and intermittent).
	Duration time.Duration
	// Seed seeds every random choice (arrivals, keys, targets).
	Seed uint64

	// Key is the key of the single-key patterns; empty: KeyPrefix followed
	// by the pattern name and the start time, fresh for every run.
	Key string
	// KeyPrefix starts every generated key; the keys pattern's keys are
	// KeyPrefix + "k" + index.
	KeyPrefix string
	// Rule, if set, is sent as rule= with every check.
	Rule string

	// Client is raw (limitload's own HTTP/1.1 keep-alive client) or http
	// (net/http with a tuned Transport).
	Client string
	// Conns is the number of keep-alive connections, and so of requests in
	// flight, per target.
	Conns int
	// Timeout bounds each request.
	Timeout time.Duration
	// Align, if positive, starts the schedule at the next multiple of Align
	// on the wall clock (e.g. a window, to put the seed's window edges on
	// the epoch-aligned edges).
	Align time.Duration
	// Phase, if positive, also breaks the latency down by the send
	// instant's phase in wall-clock multiples of Phase, in 10 bins: with
	// the nodes' sync interval it shows what their aligned ticks cost.
	Phase time.Duration
	// Preflight checks before the run that every target answers /check and
	// that its RateLimit-Policy has Limit and Window.
	Preflight bool

	// Progress is the interval of the progress line on stderr; 0 turns it off.
	Progress time.Duration
	// JSON prints the final report as JSON instead of text.
	JSON bool
	// Worst is how many keys the report lists (the worst first).
	Worst int
	// MaxLog bounds the response log the accuracy analysis reads; requests
	// beyond it are sent and timed but not analysed (the report says so).
	MaxLog int
	// TraceOut, if set, receives the answered requests as a limitsim trace,
	// "TIME_MS KEY NODE" by send instant.
	TraceOut string
	// CPUProfile, if set, receives limitload's own CPU profile.
	CPUProfile string
	// DryRun prints the schedule as a limitsim trace and sends nothing.
	DryRun bool

	// Library only: no flag sets these.

	// Streams, if any, are the run's arrivals instead of a pattern's
	// (Pattern must then be PatternStreams): each its own rate of
	// requests on its own keys, merged in time order. Their keys are
	// used as given, without the run id.
	Streams []Stream
	// Dial, if set, opens every connection to a target (a network
	// namespace's dialer, say); nil dials from this process's network.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Available, if set, is asked for the target the spread picks; a
	// target it refuses is passed over for the next one it takes (the
	// picked one when it takes none), as a load balancer passes over a
	// node out of rotation. Called from Run's scheduling goroutine.
	Available func(target int) bool
	// MaxLate, if positive, drops a request that would be written more
	// than MaxLate after its instant, instead of sending it late: a
	// generator that fell behind does not catch up in a burst the nodes
	// did not get on time. It counts as unsent.
	MaxLate time.Duration
	// OnePerKey keeps at most one request of a key in flight, as a client
	// that waits for each answer: one due while the key's last is still
	// unanswered is dropped, counted unsent (and observed), not queued.
	// It holds a flag per key.
	OnePerKey bool
	// Observe, if set, is called with every request of the schedule that
	// was due before the run ended: sent and answered or failed, or
	// dropped unsent (OnePerKey, MaxLate, the run ending). The workers and
	// the scheduling goroutine call it concurrently; it must be quick.
	Observe func(Outcome)
}

// A Stream is one source of requests of a PatternStreams run: Rate
// requests a second, evenly spaced from instant 0 or (Poisson) a Poisson
// process, until Config.Duration. With Keys above 1 its keys are Key
// followed by an index in [0, Keys), drawn by Zipf(ZipfS) or uniformly
// when ZipfS is 0; else its one key is Key.
type Stream struct {
	Key     string
	Keys    int
	ZipfS   float64
	Rate    float64
	Poisson bool
}

// Outcome is what happened to one request (Config.Observe). Its instants
// are after Result.Start: Sched when it was due, Sent when it was
// written and Done when its answer (or error) came; Sent and Done are 0
// when it was not sent.
type Outcome struct {
	Stream   int // its stream in Config.Streams; 0 for the other patterns
	Key      int // its key's index in the stream; 0 for a single key
	Target   int // in Config.Targets
	Sched    time.Duration
	Sent     time.Duration
	Done     time.Duration
	Status   int   // the HTTP status, StatusError or StatusNotSent
	Err      error // why there is no answer (StatusError)
	FailOpen bool  // the answer carried X-RateLimit-Error
}

// DefaultConfig returns the defaults of every flag: the seed's steady 2x on
// 127.0.0.1:8080, limit 600 per 60 s.
func DefaultConfig() Config {
	return Config{
		Targets:   []string{"127.0.0.1:8080"},
		Spread:    SpreadRandom,
		Pattern:   PatternSteady,
		Limit:     600,
		Window:    seedWindow,
		Factor:    2,
		Keys:      200_000,
		ZipfS:     1.1,
		Seed:      seedLCGSeed,
		KeyPrefix: "limitload-",
		Client:    ClientRaw,
		Conns:     32,
		Timeout:   2 * time.Second,
		Preflight: true,
		Progress:  time.Second,
		Worst:     10,
		MaxLog:    5_000_000,
	}
}

// ErrRemoteTarget is returned by Validate for a target outside the loopback
// range without AllowRemote.
var ErrRemoteTarget = errors.New("loadgen: target outside the loopback range (127.0.0.0/8, ::1); pass --allow-remote to drive it")

// ErrConfig marks every other invalid configuration.
var ErrConfig = errors.New("loadgen: invalid configuration")

func configErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
}

// limitRate is the limit expressed per second.
func (c *Config) limitRate() float64 { return float64(c.Limit) / c.Window.Seconds() }

// Validate checks every field and fills the ones derived from others:
// Targets become IP:PORT (names resolved), Rate and Duration get their
// pattern defaults. It returns ErrRemoteTarget or an error wrapping
// ErrConfig that names the flag.
func (c *Config) Validate(resolve func(host string) ([]string, error)) error {
	if err := c.validatePattern(); err != nil {
		return err
	}
	if err := c.validateKeys(); err != nil {
		return err
	}
	switch c.Spread {
	case SpreadRandom, SpreadRoundRobin, SpreadLCG:
	case SpreadKeyRoundRobin:
		if n := c.keyCount(); n > maxKeyRoundRobin {
			return configErr("--spread %s: %d keys, at most %d", c.Spread, n, maxKeyRoundRobin)
		}
	default:
		return configErr("--spread %q: want random, round-robin, key-round-robin or lcg", c.Spread)
	}
	switch c.Client {
	case ClientRaw, ClientHTTP:
	default:
		return configErr("--client %q: want raw or http", c.Client)
	}
	if c.Conns < 1 || c.Conns > maxConns {
		return configErr("--conns %d: want 1..%d", c.Conns, maxConns)
	}
	if c.Timeout <= 0 {
		return configErr("--timeout %v: must be positive", c.Timeout)
	}
	if c.Phase < 0 || (c.Phase > 0 && c.Phase < 10*time.Microsecond) {
		return configErr("--phase %v: want 0 (off) or at least 10µs", c.Phase)
	}
	if c.Align < 0 {
		return configErr("--align %v: must not be negative", c.Align)
	}
	if c.Progress < 0 {
		return configErr("--progress %v: must not be negative (0 turns it off)", c.Progress)
	}
	if c.Worst < 1 || c.Worst > maxWorstKeys {
		return configErr("--worst %d: want 1..%d", c.Worst, maxWorstKeys)
	}
	if c.MaxLog < 1 {
		return configErr("--max-log %d: must be at least 1", c.MaxLog)
	}
	if c.DryRun && len(c.Targets) == 0 {
		return nil // a schedule without a node column
	}
	return c.validateTargets(resolve)
}

func (c *Config) validatePattern() error {
	if c.Limit < 1 || c.Limit > math.MaxInt32 {
		return configErr("--limit %d: want 1..%d", c.Limit, math.MaxInt32)
	}
	if c.Window < time.Millisecond || c.Window%time.Millisecond != 0 {
		return configErr("--window %v: want a whole number of milliseconds, at least 1ms", c.Window)
	}
	if c.Duration < 0 {
		return configErr("--duration %v: must not be negative", c.Duration)
	}
	if !(c.Factor > 0) || math.IsInf(c.Factor, 0) {
		return configErr("--factor %v: must be positive", c.Factor)
	}
	if !(c.Rate >= 0) || c.Rate > maxRateFlag {
		return configErr("--rate %v: want 0..%d requests/s", c.Rate, maxRateFlag)
	}
	if (c.Pattern == PatternStreams) != (len(c.Streams) > 0) {
		return configErr("pattern %q with %d streams: streams need pattern %q, and it needs streams", c.Pattern, len(c.Streams), PatternStreams)
	}
	switch c.Pattern {
	case PatternSteady, PatternEdgeBurst, PatternIntermittent:
	case PatternStreams:
		if err := c.validateStreams(); err != nil {
			return err
		}
	case PatternRandom:
		if c.Rate == 0 {
			c.Rate = c.Factor * c.limitRate()
		}
	case PatternKeys:
		if c.Rate == 0 {
			return configErr("--pattern keys needs --rate (total requests/s over all keys)")
		}
		if c.Keys < 1 || c.Keys > maxKeysFlag {
			return configErr("--keys %d: want 1..%d", c.Keys, maxKeysFlag)
		}
		if c.ZipfS != 0 && !(c.ZipfS > 1) {
			return configErr("--zipf-s %v: want 0 (uniform) or more than 1", c.ZipfS)
		}
	default:
		return configErr("--pattern %q: want steady, edge-burst, intermittent, random or keys", c.Pattern)
	}
	if c.Duration == 0 {
		c.Duration = c.defaultDuration()
	}
	if n := c.expectedRequests(); n > maxRequests {
		return configErr("the schedule holds about %.0f requests, more than %d: shorten --duration or lower the rate", n, maxRequests)
	}
	return nil
}

// defaultDuration is a pattern's own length: the seed's 180 s of model time
// (3 windows) scaled, and 60 s for keys (HS2's run).
func (c *Config) defaultDuration() time.Duration {
	switch c.Pattern {
	case PatternKeys, PatternStreams:
		return time.Minute
	default:
		return 3 * c.Window
	}
}

// expectedRequests is the size of the schedule, about.
func (c *Config) expectedRequests() float64 {
	switch c.Pattern {
	case PatternSteady:
		return c.Factor * c.limitRate() * c.Duration.Seconds()
	case PatternEdgeBurst:
		return 4 * float64(c.Limit)
	case PatternIntermittent:
		return 3 * float64(c.Limit)
	case PatternStreams:
		return c.streamsRate() * c.Duration.Seconds()
	default:
		return c.Rate * c.Duration.Seconds()
	}
}

// streamsRate is the streams' requests per second in all.
func (c *Config) streamsRate() float64 {
	var r float64
	for _, s := range c.Streams {
		r += s.Rate
	}
	return r
}

// keyCount is the number of the run's keys.
func (c *Config) keyCount() int {
	switch c.Pattern {
	case PatternKeys:
		return c.Keys
	case PatternStreams:
		return c.streamsKeys()
	default:
		return 1
	}
}

// streamsKeys is the number of keys of the streams in all.
func (c *Config) streamsKeys() int {
	n := 0
	for _, s := range c.Streams {
		n += max(s.Keys, 1)
	}
	return n
}

func (c *Config) validateStreams() error {
	total := 0
	for i, s := range c.Streams {
		if s.Key == "" {
			return configErr("stream %d: no key", i)
		}
		if err := checkKeyText(fmt.Sprintf("stream %d key", i), s.Key, false); err != nil {
			return err
		}
		if len(s.Key)+20 > maxKeyBytes {
			return configErr("stream %d: keys would exceed %d bytes", i, maxKeyBytes)
		}
		if !(s.Rate > 0) || s.Rate > maxRateFlag {
			return configErr("stream %d: rate %v: want more than 0, at most %d requests/s", i, s.Rate, maxRateFlag)
		}
		if s.Keys < 0 || s.Keys > maxKeysFlag {
			return configErr("stream %d: %d keys: want 0..%d", i, s.Keys, maxKeysFlag)
		}
		if s.ZipfS != 0 && !(s.ZipfS > 1) {
			return configErr("stream %d: Zipf exponent %v: want 0 (uniform) or more than 1", i, s.ZipfS)
		}
		total += max(s.Keys, 1)
	}
	if total > maxKeysFlag {
		return configErr("the streams have %d keys, more than %d", total, maxKeysFlag)
	}
	return nil
}

func (c *Config) validateKeys() error {
	if err := checkKeyText("--key-prefix", c.KeyPrefix, true); err != nil {
		return err
	}
	if err := checkKeyText("--key", c.Key, true); err != nil {
		return err
	}
	if len(c.KeyPrefix)+len(c.Key)+64 > maxKeyBytes {
		return configErr("--key-prefix and --key: keys would exceed %d bytes", maxKeyBytes)
	}
	if c.Rule != "" {
		if err := checkKeyText("--rule", c.Rule, false); err != nil {
			return err
		}
	}
	return nil
}

// CheckRunID refuses a run id that a key cannot carry (see checkKeyText).
func CheckRunID(id string) error { return checkKeyText("--run-id", id, false) }

// checkKeyText refuses what the server or a limitsim trace cannot carry:
// invalid UTF-8, white space and control characters.
func checkKeyText(flag, s string, emptyOK bool) error {
	if s == "" && !emptyOK {
		return configErr("%s: must not be empty", flag)
	}
	if !utf8.ValidString(s) {
		return configErr("%s %q: not valid UTF-8", flag, s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return configErr("%s %q: white space and control characters are not allowed", flag, s)
		}
	}
	return nil
}

// validateTargets turns every target into IP:PORT and applies the loopback
// guard. resolve looks a host name up (net.DefaultResolver in limitload;
// tests pass a fake); every address of a name must be loopback, and the
// first one is used, so a name cannot change its mind between the check
// and the connection.
func (c *Config) validateTargets(resolve func(host string) ([]string, error)) error {
	if len(c.Targets) == 0 {
		return configErr("--targets: at least one HOST:PORT")
	}
	if len(c.Targets) > maxTargets {
		return configErr("--targets: %d targets, at most %d", len(c.Targets), maxTargets)
	}
	out := make([]string, len(c.Targets))
	for i, t := range c.Targets {
		addr, err := ResolveTarget(t, c.AllowRemote, resolve)
		if err != nil {
			return err
		}
		out[i] = addr
	}
	c.Targets = out
	return nil
}

// ResolveTarget validates one target, an optional "http://" prefix then
// HOST:PORT, and returns it as IP:PORT: resolve looks a host name up, and
// without allowRemote every address must be loopback (ErrRemoteTarget).
func ResolveTarget(t string, allowRemote bool, resolve func(host string) ([]string, error)) (string, error) {
	raw := t
	t = strings.TrimPrefix(t, "http://")
	t = strings.TrimSuffix(t, "/")
	if strings.Contains(t, "://") {
		return "", configErr("--targets %q: only plain http is supported", raw)
	}
	host, port, err := net.SplitHostPort(t)
	if err != nil {
		return "", configErr("--targets %q: want HOST:PORT: %v", raw, err)
	}
	if p, err := netip.ParseAddrPort("0.0.0.0:" + port); err != nil || p.Port() == 0 {
		return "", configErr("--targets %q: port %q: want 1..65535", raw, port)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if host == "" {
			return "", configErr("--targets %q: empty host", raw)
		}
		if resolve == nil {
			return "", configErr("--targets %q: a host name, and no resolver to look it up", raw)
		}
		names, err := resolve(host)
		if err != nil {
			return "", fmt.Errorf("%w: --targets %q: %w", ErrConfig, raw, err)
		}
		for _, n := range names {
			if a, err := netip.ParseAddr(n); err == nil {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			return "", configErr("--targets %q: %s has no address", raw, host)
		}
	}
	if !allowRemote {
		for _, a := range addrs {
			if !a.Unmap().IsLoopback() {
				return "", fmt.Errorf("%w: %s is %s", ErrRemoteTarget, raw, a)
			}
		}
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), mustPort(port)).String(), nil
}

func mustPort(port string) uint16 {
	p, _ := netip.ParseAddrPort("0.0.0.0:" + port)
	return p.Port()
}
