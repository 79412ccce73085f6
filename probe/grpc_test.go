package probe

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/edgequorum/edgequorum/internal/poll"
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

// startH2CServer serves h on loopback over plaintext HTTP/2, as a gRPC server
// does, and returns its port. Tests use it to answer the probe in ways a real
// gRPC server never would.
func startH2CServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	ts := httptest.NewUnstartedServer(h)
	ts.Config.Protocols = &protocols
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return strconv.Itoa(ts.Listener.Addr().(*net.TCPAddr).Port)
}

// grpcAnswer answers a health check with body, then status and message as
// trailers, the way a gRPC server ends a call.
func grpcAnswer(contentType string, body []byte, status, message string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		w.Header().Set("Grpc-Status", status)
		if message != "" {
			w.Header().Set("Grpc-Message", message)
		}
	}
}

// TestGRPCProberRequest checks what the probe sends: the health check method
// over HTTP/2 with gRPC's headers, and the service it asks about.
func TestGRPCProberRequest(t *testing.T) {
	type seen struct {
		proto, path, contentType, te string
		body                         []byte
	}
	got := make(chan seen, 1)
	port := startH2CServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Proto, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("TE"), b}
		grpcAnswer("application/grpc", healthAnswer(grpcServing), "0", "")(w, r)
	})
	p, err := NewProber(mustParse(t, "grpc:port="+port+",service=edgequorum.Agent"), ProberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); r != Success {
		t.Fatalf("Probe = %v (%v), want Success", r, err)
	}
	s := <-got
	want := appendGRPCMessage(nil, encodeHealthCheckRequest("edgequorum.Agent"))
	if s.proto != "HTTP/2.0" || s.path != grpcHealthCheckPath || s.contentType != "application/grpc" || s.te != "trailers" || !bytes.Equal(s.body, want) {
		t.Fatalf("request %s %s content-type %q te %q body %x, want HTTP/2.0 %s application/grpc trailers %x",
			s.proto, s.path, s.contentType, s.te, s.body, grpcHealthCheckPath, want)
	}
	var req healthpb.HealthCheckRequest
	if err := proto.Unmarshal(s.body[5:], &req); err != nil || req.GetService() != "edgequorum.Agent" {
		t.Fatalf("grpc-go reads the request as %v (%v), want service edgequorum.Agent", &req, err)
	}
}

// healthAnswer is a framed HealthCheckResponse, encoded by the protobuf
// library the probe no longer links.
func healthAnswer(status healthpb.HealthCheckResponse_ServingStatus) []byte {
	b, err := proto.Marshal(&healthpb.HealthCheckResponse{Status: status})
	if err != nil {
		panic(err)
	}
	return appendGRPCMessage(nil, b)
}

// TestGRPCProberRefusesMalformedAnswers answers the probe as no gRPC server
// would: each is a Failure whose error says what was wrong, never Success.
func TestGRPCProberRefusesMalformedAnswers(t *testing.T) {
	serving := healthAnswer(grpcServing)
	huge := appendGRPCMessage(nil, bytes.Repeat([]byte{0x0a, 0x01, 'x'}, maxGRPCResponse))
	tests := []struct {
		name    string
		h       http.HandlerFunc
		wantErr string
	}{
		{"HTTP error", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) }, "HTTP status 503"},
		{"not gRPC", grpcAnswer("text/plain", serving, "0", ""), "is not gRPC"},
		{"no grpc-status", grpcAnswer("application/grpc", serving, "", ""), "no valid grpc-status"},
		{"status not a code", grpcAnswer("application/grpc", serving, "OK", ""), "no valid grpc-status"},
		{"status out of range", grpcAnswer("application/grpc", serving, "17", ""), "no valid grpc-status"},
		{"failed call", grpcAnswer("application/grpc", nil, "14", "down%20for%20maintenance"), `gRPC status Unavailable (14): "down for maintenance"`},
		{"unknown service", grpcAnswer("application/grpc", nil, "5", "unknown service"), `does not know service ""`},
		{"no health service", grpcAnswer("application/grpc", nil, "12", ""), "does not implement grpc.health.v1: gRPC status Unimplemented (12)"},
		{"long message", grpcAnswer("application/grpc", nil, "13", strings.Repeat("x", 10_000)), strings.Repeat("x", maxGRPCMessage) + "…"},
		{"compressed", grpcAnswer("application/grpc", append([]byte{1}, serving[1:]...), "0", ""), "message flag 0x1"},
		{"two messages", grpcAnswer("application/grpc", append(slices.Clone(serving), serving...), "0", ""), "want exactly one message"},
		{"cut short", grpcAnswer("application/grpc", serving[:len(serving)-1], "0", ""), "want exactly one message"},
		{"no body", grpcAnswer("application/grpc", nil, "0", ""), "0-byte body"},
		{"huge body", grpcAnswer("application/grpc", huge, "0", ""), "body longer than"},
		{"bad protobuf", grpcAnswer("application/grpc", appendGRPCMessage(nil, []byte{0x08}), "0", ""), "status:"},
		{"not serving", grpcAnswer("application/grpc", healthAnswer(grpcNotServing), "0", ""), "is NOT_SERVING"},
		{"status absent", grpcAnswer("application/grpc", appendGRPCMessage(nil, nil), "0", ""), "is UNKNOWN"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, "HTTP status 302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProber(mustParse(t, "grpc:port="+startH2CServer(t, tt.h)), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second)
			if got != Failure || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Probe = %v (%v), want Failure with an error naming %q", got, err, tt.wantErr)
			}
		})
	}
}

// TestDecodeHealthCheckResponse reads answers grpc-go encodes, with fields it
// does not know, as protobuf requires.
func TestDecodeHealthCheckResponse(t *testing.T) {
	for _, s := range []healthpb.HealthCheckResponse_ServingStatus{0, 1, 2, 3} {
		got, err := decodeHealthCheckResponse(healthAnswer(s))
		if err != nil || got != int32(s) {
			t.Fatalf("decode(%v) = %d, %v", s, got, err)
		}
	}
	msg := protowire.AppendTag(nil, 7, protowire.BytesType)
	msg = protowire.AppendString(msg, "a field of a later version")
	msg = protowire.AppendTag(msg, 1, protowire.VarintType)
	msg = protowire.AppendVarint(msg, grpcServing)
	msg = protowire.AppendTag(msg, 9, protowire.Fixed32Type)
	msg = protowire.AppendFixed32(msg, 42)
	if got, err := decodeHealthCheckResponse(appendGRPCMessage(nil, msg)); err != nil || got != grpcServing {
		t.Fatalf("decode with unknown fields = %d, %v, want SERVING", got, err)
	}
}

// FuzzHealthCheckResponse feeds the decoder what a hostile gRPC target could
// send: it must answer with a status or an error, never panic, and read every
// well-formed answer as grpc-go wrote it.
func FuzzHealthCheckResponse(f *testing.F) {
	for _, s := range []int32{0, 1, 2, 3, -1, 1 << 30} {
		f.Add(healthAnswer(healthpb.HealthCheckResponse_ServingStatus(s)))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 2, 0x08})
	f.Add([]byte{1, 0, 0, 0, 2, 0x08, 0x01})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeHealthCheckResponse(body)
		if err != nil {
			if !errors.Is(err, errGRPCResponse) {
				t.Fatalf("error %v does not say the response was malformed", err)
			}
			return
		}
		var want healthpb.HealthCheckResponse
		if perr := proto.Unmarshal(body[5:], &want); perr == nil && int32(want.GetStatus()) != got {
			t.Fatalf("decoded status %d, grpc-go reads %d", got, want.GetStatus())
		}
	})
}

// TestGRPCProberFreshConnectionPerProbe checks the kubelet's rule the probe
// keeps: each probe dials anew and leaves no connection open behind it, so a
// target that stops accepting connections fails the next probe instead of
// answering on one kept from before.
func TestGRPCProberFreshConnectionPerProbe(t *testing.T) {
	var (
		mu             sync.Mutex
		opened, closed int
	)
	ts := httptest.NewUnstartedServer(grpcAnswer("application/grpc", healthAnswer(grpcServing), "0", ""))
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	ts.Config.Protocols = &protocols
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			opened++
		case http.StateClosed, http.StateHijacked:
			closed++
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	p, err := NewProber(mustParse(t, "grpc:port="+strconv.Itoa(port)), ProberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if r, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); r != Success {
			t.Fatalf("probe %d = %v (%v), want Success", i+1, r, err)
		}
	}
	poll.UntilTrue(t, waitTimeout, "both probe connections closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return opened == 2 && closed == 2
	})

	// The target stops listening: nothing kept lets the next probe pass.
	if err := ts.Listener.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); r != Failure {
		t.Fatalf("probe of a closed port = %v (%v), want Failure", r, err)
	}
}
