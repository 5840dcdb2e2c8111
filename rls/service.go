package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// ErrInvalidConfig wraps the errors of Config.Validate and New.
var ErrInvalidConfig = errors.New("rls: invalid config")

// Rules gives the Envoy configuration in force for a domain, nil when it
// has none; *limiter.Limiter implements it, switching it with the rules.
type Rules interface {
	Envoy(domain string) *envoyrules.Config
}

// Config configures a Service. The zero value is the default.
type Config struct {
	// Draft03Headers adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (the names of the IETF draft's version 03, which
	// envoyproxy/ratelimit sends) to response_headers_to_add, beside the
	// RateLimit fields.
	Draft03Headers bool
}

// DefaultConfig returns the zero Config: the RateLimit fields only.
func DefaultConfig() Config { return Config{} }

// Validate reports every invalid field, each error wrapping
// ErrInvalidConfig; every Config is valid today.
func (c Config) Validate() error { return nil }

// Limits of one call: Envoy sends a handful of descriptors of a few
// entries; more is a mistake or an attack, refused before any work.
const (
	maxDescriptors = 64
	maxEntries     = 64
)

// Service implements Envoy's RateLimitService. Build it with New.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	cfg   Config
	dec   *decision.Decider
	rules Rules
	log   *slog.Logger
	m     *metrics
	calls sync.Pool // of *call: the per-call buffers
}

// New returns a Service deciding with dec on the Envoy configurations of
// rules, registering its metrics on reg. log may be nil.
func New(cfg Config, dec *decision.Decider, rules Rules, reg prometheus.Registerer, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dec == nil || rules == nil || reg == nil {
		return nil, fmt.Errorf("%w: nil Decider, Rules or Registerer", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, dec: dec, rules: rules, log: log, m: m}
	s.calls.New = func() any { return new(call) }
	return s, nil
}

// ShouldRateLimit decides a call: see the package documentation.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (resp *rlsv3.RateLimitResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			// NFR3: the limiter never causes an outage, not even through a
			// bug of its own here.
			s.m.result("error")
			s.log.Error("rate limit call panicked; answered OK", "panic", r, "domain", req.GetDomain())
			resp, err = allOK(len(req.GetDescriptors())), nil
		}
	}()
	c := s.calls.Get().(*call)
	defer s.calls.Put(c)
	if msg := c.plan(req, s.rules); msg != "" {
		s.m.result("invalid")
		return nil, status.Error(codes.InvalidArgument, msg)
	}
	if len(c.reqs) > 0 {
		if i, err := s.dec.DecideAll(ctx, c.reqs, c.results(len(c.reqs))); err != nil {
			s.m.result("invalid")
			return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("descriptor %d: %v", c.reqIdx[i], err))
		}
	}
	resp = c.answer(s.cfg)
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		s.m.result("over_limit")
	} else {
		s.m.result("ok")
	}
	return resp, nil
}

// allOK is the answer that lets a call through: every descriptor OK.
func allOK(n int) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for range n {
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK})
	}
	return resp
}

// hitsOf returns the hits of a descriptor: its own hits_addend (0 checks
// without counting), or else the request's (0 means unset: 1), as
// envoyproxy/ratelimit reads them (utils.GetHitsAddends).
func hitsOf(reqHits uint32, own *uint64) int64 {
	if own != nil {
		return int64(min(*own, math.MaxInt64))
	}
	return int64(max(reqHits, 1))
}

// compile-time check against the generated interface.
var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// limiterRequest builds the decision request for a counted descriptor.
func limiterRequest(key, rule string, hits int64, override *limiter.LimitSpec) limiter.Request {
	r := limiter.Request{Key: key, Rule: rule, Hits: hits, Limit: override}
	if hits == 0 {
		r.Peek = true // hits_addend 0: a check only
	}
	return r
}
