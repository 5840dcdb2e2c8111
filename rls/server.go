package rls

import (
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// NewServer returns a gRPC server offering s as Envoy's rate limit
// service, the standard health service (SERVING for "" and
// "envoy.service.ratelimit.v3.RateLimitService") and server reflection,
// so that grpcurl and grpc_health_probe work against it unconfigured.
// The caller serves it (Serve) and stops it (GracefulStop).
func NewServer(s *Service, opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(g, s)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return g
}
