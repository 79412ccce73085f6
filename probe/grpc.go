package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// grpcProber calls grpc.health.v1.Health/Check over plaintext, like the
// kubelet's gRPC probe, and succeeds only on SERVING.
type grpcProber struct {
	port    string
	service string
	dial    func(ctx context.Context, network, address string) (net.Conn, error)
}

func newGRPCProber(s Spec, dial func(ctx context.Context, network, address string) (net.Conn, error)) *grpcProber {
	return &grpcProber{port: strconv.Itoa(s.Port), service: s.Service, dial: dial}
}

func (p *grpcProber) Probe(ctx context.Context, host string) (Result, error) {
	if err := checkHost(host); err != nil {
		return Unknown, err
	}
	addr := net.JoinHostPort(host, p.port)
	// A fresh connection per probe, as in the kubelet: a cached channel would
	// hide a peer that stopped accepting connections, and it would hold
	// goroutines for targets long gone. passthrough hands the address to the
	// dialer as is, without a resolver of its own.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return p.dial(ctx, "tcp", a) }),
		grpc.WithUserAgent(userAgent))
	if err != nil {
		return Unknown, fmt.Errorf("grpc probe: %w", err)
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: p.service})
	if err != nil {
		if ctx.Err() != nil {
			// Make a timeout look like one to errors.Is, as it does
			// for the other probers; gRPC's status errors do not wrap.
			return Failure, fmt.Errorf("grpc probe %s: %w (%s)", addr, ctx.Err(), status.Convert(err).Message())
		}
		if status.Code(err) == codes.Unimplemented {
			return Failure, fmt.Errorf("grpc probe %s: server does not implement grpc.health.v1: %w", addr, err)
		}
		return Failure, fmt.Errorf("grpc probe %s: %w", addr, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Errorf("grpc probe %s: service %q is %s", addr, p.service, s)
	}
	return Success, nil
}
