package rls

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limiterd/limiterd/limiter"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// TestReadmeExample2: "Only allow 5 marketing messages a day" to a number,
// and "100 messages a day to any unique phone number", asked as Envoy
// asks, both descriptors in one call. The sixth marketing message is over
// the limit, and, unlike envoyproxy/ratelimit, that call does not use up
// the number's daily 100.
func TestReadmeExample2(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example2.yaml", readme(t, "example2.yaml"))
	marketing := desc("message_type", "marketing", "to_number", "2061111111")
	number := desc("to_number", "2061111111")
	for i := range 5 {
		resp := f.call(t, "messaging", marketing, number)
		if resp.OverallCode != ok {
			t.Fatalf("message %d: %v", i+1, resp.OverallCode)
		}
		st := resp.Statuses[0]
		if st.CurrentLimit.GetRequestsPerUnit() != 5 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || st.LimitRemaining != uint32(4-i) {
			t.Fatalf("message %d: marketing status %v", i+1, st)
		}
		if st := resp.Statuses[1]; st.CurrentLimit.GetRequestsPerUnit() != 100 || st.LimitRemaining != uint32(99-i) {
			t.Fatalf("message %d: number status %v", i+1, st)
		}
	}
	resp := f.call(t, "messaging", marketing, number)
	if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[0].LimitRemaining != 0 || resp.Statuses[1].Code != ok {
		t.Fatalf("the sixth marketing message: %v", resp)
	}
	if got := header(resp, "Retry-After"); got == "" {
		t.Fatal("no Retry-After on an over-limit call")
	}
	// The denied call counted nothing: the number has 95 left.
	resp = f.call(t, "messaging", number)
	if resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 94 {
		t.Fatalf("after a denied call, a plain message to the number: %v, want 94 left (95 before it)", resp.Statuses[0])
	}
	// Another number is counted apart.
	if resp := f.call(t, "messaging", desc("message_type", "marketing", "to_number", "2062222222")); resp.OverallCode != ok {
		t.Fatalf("another number: %v", resp)
	}
	// A day later the window has moved on.
	f.clock.advance(24*time.Hour + time.Second)
	if resp := f.call(t, "messaging", marketing, number); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("a day later: %v", resp)
	}
}

// TestReadmeExample3: 10 a second per address, and a blocked address whose
// limit is 0: over the limit every time, nothing counted.
func TestReadmeExample3(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example3.yaml", readme(t, "example3.yaml"))
	for i := range 12 {
		resp := f.call(t, "edge_proxy_per_ip", desc("remote_address", "10.0.0.1"))
		if want := i < 10; (resp.OverallCode == ok) != want {
			t.Fatalf("request %d from 10.0.0.1: %v, want OK %v", i+1, resp.OverallCode, want)
		}
	}
	resp := f.call(t, "edge_proxy_per_ip", desc("remote_address", "50.0.0.5"))
	st := resp.Statuses[0]
	if resp.OverallCode != over || st.CurrentLimit.GetRequestsPerUnit() != 0 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND || st.LimitRemaining != 0 {
		t.Fatalf("the blocked address: %v", resp)
	}
	f.clock.advance(time.Second)
	if resp := f.call(t, "edge_proxy_per_ip", desc("remote_address", "10.0.0.1")); resp.OverallCode != ok {
		t.Fatalf("a second later: %v", resp)
	}
}

// TestReadmeExample5: an unlimited descriptor is OK with limit_remaining
// 4294967295 and no current_limit, as envoyproxy/ratelimit answers.
func TestReadmeExample5(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example5.yaml", readme(t, "example5.yaml"))
	for range 200 {
		resp := f.call(t, "internal", desc("ldap", "users"))
		if st := resp.Statuses[0]; resp.OverallCode != ok || st.LimitRemaining != math.MaxUint32 || st.CurrentLimit != nil {
			t.Fatalf("ldap: %v", resp)
		}
	}
	if resp := f.call(t, "internal", desc("azure", "x")); resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 100 ||
		resp.Statuses[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("azure: %v", resp)
	}
}

// What no rule governs, and an unknown domain, are OK with no current_limit.
func TestNoLimit(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example1.yaml", readme(t, "example1.yaml"))
	for _, tc := range []struct {
		domain string
		d      *commonv3.RateLimitDescriptor
	}{
		{"mongo_cps", desc("database", "orders")},
		{"mongo_cps", desc("database", "users", "extra", "entry")},
		{"no_such_domain", desc("database", "users")},
	} {
		resp := f.call(t, tc.domain, tc.d)
		if st := resp.Statuses[0]; resp.OverallCode != ok || st.Code != ok || st.CurrentLimit != nil || st.LimitRemaining != 0 {
			t.Errorf("%s %v: %v", tc.domain, tc.d, resp)
		}
		if len(resp.ResponseHeadersToAdd) != 0 {
			t.Errorf("%s %v: headers %v, want none", tc.domain, tc.d, resp.ResponseHeadersToAdd)
		}
	}
}

// TestInvalidCalls: each malformed call is InvalidArgument with a message
// saying what is wrong, and counts nothing.
func TestInvalidCalls(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example1.yaml", readme(t, "example1.yaml"))
	withHits := desc("database", "users")
	withHits.IsNegativeHits = true
	override := func(unit typev3.RateLimitUnit, n uint32) *commonv3.RateLimitDescriptor {
		d := desc("database", "users")
		d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
		return d
	}
	long := desc("database", strings.Repeat("x", 1100))
	for _, tc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*commonv3.RateLimitDescriptor{desc("database", "users")}}, "domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "mongo_cps"}, "descriptor list must not be empty"},
		{"descriptor without entries", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{desc("database", "users"), {}}}, "descriptor 1 has no entries"},
		{"entry without key", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{desc("", "users")}}, "entry 0 has no key"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{withHits}}, "is_negative_hits"},
		{"override unit unknown", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{override(typev3.RateLimitUnit_UNKNOWN, 5)}}, "unit UNKNOWN"},
		{"override of a year", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{override(typev3.RateLimitUnit_YEAR, 5)}}, "unit YEAR"},
		{"key too long", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{long}}, "descriptor 0: its domain and entries make a key of"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: manyDescriptors(65)}, "at most 64"},
	} {
		_, err := f.client.ShouldRateLimit(context.Background(), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("%s: %v, want InvalidArgument saying %q", tc.name, err, tc.msg)
		}
	}
	if n := f.metric(t, "limiterd_grpc_requests_total", map[string]string{"result": "invalid"}); n != 9 {
		t.Errorf("limiterd_grpc_requests_total{result=invalid} = %v, want 9", n)
	}
	if resp := f.call(t, "mongo_cps", desc("database", "users")); resp.Statuses[0].LimitRemaining != 499 {
		t.Errorf("after the invalid calls: %v, want nothing counted before", resp.Statuses[0])
	}
}

func manyDescriptors(n int) []*commonv3.RateLimitDescriptor {
	var ds []*commonv3.RateLimitDescriptor
	for range n {
		ds = append(ds, desc("database", "users"))
	}
	return ds
}

// TestHitsAddend: the request's hits_addend (0 is 1), and a descriptor's
// own, which may be 0: a check that counts nothing. Hits above the limit
// can never fit: over the limit, nothing of the call counted.
func TestHitsAddend(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example1.yaml", readme(t, "example1.yaml"))
	ask := func(reqHits uint32, own *uint64, kv ...string) *rlsv3.RateLimitResponse {
		t.Helper()
		d := desc(kv...)
		if own != nil {
			d.HitsAddend = wrapperspb.UInt64(*own)
		}
		resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "mongo_cps", HitsAddend: reqHits, Descriptors: []*commonv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	u := func(v uint64) *uint64 { return &v }
	steps := []struct {
		name      string
		reqHits   uint32
		own       *uint64
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{
		{"request hits 0 is 1", 0, nil, ok, 499},
		{"request hits 3", 3, nil, ok, 496},
		{"descriptor hits 0: a check", 7, u(0), ok, 496},
		{"descriptor hits 10 over the request's", 1, u(10), ok, 486},
		{"hits above the limit", 0, u(501), over, 0},
		{"nothing counted by it", 0, u(0), ok, 486},
	}
	for _, s := range steps {
		resp := ask(s.reqHits, s.own, "database", "users")
		if st := resp.Statuses[0]; st.Code != s.code || st.LimitRemaining != s.remaining {
			t.Fatalf("%s: %v, want %v with %d remaining", s.name, st, s.code, s.remaining)
		}
	}
}

// TestLimitOverride: a descriptor's own limit decides it, counted under
// its key, once the domain is known.
func TestLimitOverride(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "example1.yaml", readme(t, "example1.yaml"))
	d := desc("database", "users")
	d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	for i := range 3 {
		resp := f.call(t, "mongo_cps", d)
		st := resp.Statuses[0]
		if want := i < 2; (st.Code == ok) != want || st.CurrentLimit.GetRequestsPerUnit() != 2 || st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("call %d: %v, want OK %v", i+1, st, want)
		}
	}
	// The file's own limit of the descriptor is untouched.
	if resp := f.call(t, "mongo_cps", desc("database", "users")); resp.Statuses[0].LimitRemaining != 499 {
		t.Fatalf("the file's limit: %v", resp.Statuses[0])
	}
}

const shadowConfig = `domain: shadow
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 2
    shadow_mode: true
  - key: plan
    value: free
    rate_limit:
      name: free
      unit: minute
      requests_per_unit: 1
  - key: plan
    value: paid
    rate_limit:
      unit: minute
      requests_per_unit: 3
      replaces:
        - name: free
`

// TestShadowModeAndReplaces: a shadow_mode descriptor is counted and
// reported but never over the limit; a limit named in another matched
// descriptor's replaces is dropped for the call.
func TestShadowModeAndReplaces(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, "shadow.yaml", shadowConfig)
	for i := range 4 {
		resp := f.call(t, "shadow", desc("user", "u1"))
		st := resp.Statuses[0]
		if resp.OverallCode != ok || st.Code != ok || st.CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("shadow call %d: %v", i+1, resp)
		}
		if want := uint32(max(1-i, 0)); st.LimitRemaining != want {
			t.Fatalf("shadow call %d: %d remaining, want %d", i+1, st.LimitRemaining, want)
		}
		if header(resp, "RateLimit") != "" {
			t.Fatalf("shadow call %d: RateLimit fields %v, want none for a dry run", i+1, resp.ResponseHeadersToAdd)
		}
	}
	if n := f.metric(t, "limiterd_decisions_total", map[string]string{"rule": limiter.EnvoyRuleName("shadow", f.lim.Envoy("shadow").Descriptors[0]), "outcome": "shadow_denied"}); n != 2 {
		t.Fatalf("shadow denials counted %v, want 2", n)
	}
	// free alone: 1 a minute.
	f.call(t, "shadow", desc("plan", "free"))
	if resp := f.call(t, "shadow", desc("plan", "free")); resp.OverallCode != over {
		t.Fatalf("free twice: %v", resp)
	}
	// With paid in the same call, free is replaced.
	resp := f.call(t, "shadow", desc("plan", "free"), desc("plan", "paid"))
	if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil || resp.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 3 {
		t.Fatalf("free replaced by paid: %v", resp)
	}
}

// TestResponseHeaders: the RateLimit fields of every limited descriptor,
// Retry-After when over, and the draft-03 fields behind the option.
func TestResponseHeaders(t *testing.T) {
	for _, draft03 := range []bool{false, true} {
		f := newFixture(t, fixtureOpts{cfg: Config{Draft03Headers: draft03}}, "example2.yaml", readme(t, "example2.yaml"))
		marketing := desc("message_type", "marketing", "to_number", "1")
		number := desc("to_number", "1")
		resp := f.call(t, "messaging", marketing, number)
		r1 := limiter.EnvoyRuleName("messaging", f.lim.Envoy("messaging").Descriptors[0].Descriptors[0])
		r2 := limiter.EnvoyRuleName("messaging", f.lim.Envoy("messaging").Descriptors[1])
		if got, want := header(resp, "RateLimit-Policy"), `"`+r1+`";q=5;w=86400, "`+r2+`";q=100;w=86400`; got != want {
			t.Errorf("RateLimit-Policy %s, want %s", got, want)
		}
		if got, want := header(resp, "RateLimit"), `"`+r1+`";r=4;t=86400, "`+r2+`";r=99;t=86400`; got != want {
			t.Errorf("RateLimit %s, want %s", got, want)
		}
		if header(resp, "Retry-After") != "" {
			t.Errorf("Retry-After on an allowed call")
		}
		lim, rem := header(resp, "X-RateLimit-Limit"), header(resp, "X-RateLimit-Remaining")
		if draft03 && (lim != "5" || rem != "4" || header(resp, "X-RateLimit-Reset") != "86400") {
			t.Errorf("draft-03 fields %v", resp.ResponseHeadersToAdd)
		}
		if !draft03 && (lim != "" || rem != "") {
			t.Errorf("draft-03 fields without the option: %v", resp.ResponseHeadersToAdd)
		}
	}
}

// failing is a Checker that always fails: the limiter is broken.
type failing struct{}

func (failing) Check(time.Time, limiter.Request, *limiter.Decision) error {
	return errors.New("the counter is on fire")
}

// TestInternalErrorAnswersOK: NFR3. A failing limiter lets the call
// through, and the decision layer counts it.
func TestInternalErrorAnswersOK(t *testing.T) {
	f := newFixture(t, fixtureOpts{checker: failing{}}, "example1.yaml", readme(t, "example1.yaml"))
	resp := f.call(t, "mongo_cps", desc("database", "users"), desc("database", "default"))
	if resp.OverallCode != ok || resp.Statuses[0].Code != ok || resp.Statuses[1].Code != ok {
		t.Fatalf("with a failing limiter: %v", resp)
	}
	if n := f.metric(t, "limiterd_check_errors_total", nil); n != 2 {
		t.Fatalf("limiterd_check_errors_total = %v, want 2", n)
	}
}
