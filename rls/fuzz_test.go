package rls

import (
	"context"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzShouldRateLimit: whatever bytes a client sends as a request, once
// they decode as one, the answer is a response with one status per
// descriptor or an InvalidArgument; never a panic, never another error.
func FuzzShouldRateLimit(f *testing.F) {
	seeds := []*rlsv3.RateLimitRequest{
		{Domain: "messaging", Descriptors: []*commonv3.RateLimitDescriptor{desc("message_type", "marketing", "to_number", "1"), desc("to_number", "1")}},
		{Domain: "messaging", HitsAddend: 7, Descriptors: []*commonv3.RateLimitDescriptor{{Entries: desc("to_number", "2").Entries, HitsAddend: wrapperspb.UInt64(0)}}},
		{Domain: "messaging", Descriptors: []*commonv3.RateLimitDescriptor{{Entries: desc("to_number", "3").Entries,
			Limit: &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}}}},
		{Domain: "", Descriptors: nil},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	rules := string(mustRead(f, "../limiter/envoyrules/testdata/readme/example2.yaml"))
	svc := newFuzzService(f, rules)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		resp, err := svc.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("%v for %v", err, &req)
			}
			return
		}
		if len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
		}
	})
}
