package probe

import (
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// startGRPCServer serves gRPC on loopback, with the standard health service
// when withHealth is set, and returns its port.
func startGRPCServer(t *testing.T, withHealth bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	if withHealth {
		hs := health.NewServer()
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("edgequorum.Agent", healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus("draining", healthpb.HealthCheckResponse_NOT_SERVING)
		healthpb.RegisterHealthServer(s, hs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func TestGRPCProber(t *testing.T) {
	healthy := startGRPCServer(t, true)
	bare := startGRPCServer(t, false)
	closed := strconv.Itoa(closedPort(t))
	hanging := strconv.Itoa(hangingListener(t))
	tests := []struct {
		name        string
		spec        string
		timeout     time.Duration
		want        Result
		wantTimeout bool
	}{
		{"server serving", "grpc:port=" + healthy, 5 * time.Second, Success, false},
		{"named service serving", "grpc:port=" + healthy + ",service=edgequorum.Agent", 5 * time.Second, Success, false},
		{"named service not serving", "grpc:port=" + healthy + ",service=draining", 5 * time.Second, Failure, false},
		{"unknown service", "grpc:port=" + healthy + ",service=nope", 5 * time.Second, Failure, false},
		{"no health service", "grpc:port=" + bare, 5 * time.Second, Failure, false},
		{"connection refused", "grpc:port=" + closed, 5 * time.Second, Failure, false},
		{"accepts but never answers", "grpc:port=" + hanging, 200 * time.Millisecond, Failure, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProber(mustParse(t, tt.spec), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, "127.0.0.1", tt.timeout)
			if got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			if tt.wantTimeout && !isTimeout(err) {
				t.Fatalf("Probe error %v, want a timeout", err)
			}
		})
	}
}
