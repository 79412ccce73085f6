package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC probe speaks the few bytes of gRPC that grpc.health.v1.Health/Check
// needs — one POST over plaintext HTTP/2, a length-prefixed protobuf message
// each way, a status in the trailers — over net/http, instead of linking
// grpc-go. That library was the agent's only use of grpc, and linking it kept
// every exported method of every reachable type in the binary: 31 MB more
// binary, 8.6 MiB more resident memory at start (DESIGN.md, "Memory at 129
// members").
const (
	grpcHealthCheckPath = "/grpc.health.v1.Health/Check"
	// maxGRPCResponse bounds the response body read: a HealthCheckResponse
	// is a few bytes, so anything larger is a peer misbehaving.
	maxGRPCResponse = 4 << 10
	// maxGRPCHeaderBytes bounds a response's headers and trailers, which
	// net/http would otherwise let grow to 10 MiB.
	maxGRPCHeaderBytes = 16 << 10
	// maxGRPCMessage bounds how much of a peer's grpc-message goes into an error.
	maxGRPCMessage = 200
)

// gRPC status codes the probe acts on (google.golang.org/grpc/codes).
const (
	grpcOK            = 0
	grpcNotFound      = 5
	grpcUnimplemented = 12
)

// grpcCodeNames are the names of gRPC's status codes, by code, as
// google.golang.org/grpc/codes prints them.
var grpcCodeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

// Health check serving states (grpc.health.v1.HealthCheckResponse.ServingStatus).
const (
	grpcServing        = 1
	grpcNotServing     = 2
	grpcServiceUnknown = 3
)

// errGRPCResponse marks an answer no gRPC server gives.
var errGRPCResponse = errors.New("malformed gRPC health response")

// grpcStatusError is a call the server ended with a status other than OK.
type grpcStatusError struct {
	code    int
	message string // as the server sent it, percent-decoded
}

func (e *grpcStatusError) Error() string {
	s := fmt.Sprintf("gRPC status %s (%d)", grpcCodeNames[e.code], e.code)
	if e.message != "" {
		s += ": " + strconv.Quote(truncate(e.message, maxGRPCMessage))
	}
	return s
}

// grpcProber calls grpc.health.v1.Health/Check over plaintext HTTP/2 (prior
// knowledge, as gRPC's insecure credentials do), like the kubelet's gRPC probe,
// and succeeds only on SERVING.
type grpcProber struct {
	port    string
	service string
	client  *http.Client
}

func newGRPCProber(s Spec, dial func(ctx context.Context, network, address string) (net.Conn, error)) *grpcProber {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	return &grpcProber{
		port:    strconv.Itoa(s.Port),
		service: s.Service,
		client: &http.Client{
			// A fresh connection per probe, as in the kubelet: a kept
			// connection would hide a peer that stopped accepting new
			// ones, and would hold a goroutine for targets long gone.
			// Proxies are ignored for the reason the HTTP probe gives.
			Transport: &http.Transport{
				Proxy:                  nil,
				DialContext:            dial,
				Protocols:              &protocols,
				DisableKeepAlives:      true,
				DisableCompression:     true,
				MaxResponseHeaderBytes: maxGRPCHeaderBytes,
			},
			// gRPC has no redirects; a 3xx is a failure like any non-200.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (p *grpcProber) Probe(ctx context.Context, host string) (Result, error) {
	if err := checkHost(host); err != nil {
		return Unknown, err
	}
	addr := net.JoinHostPort(host, p.port)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+grpcHealthCheckPath,
		bytes.NewReader(appendGRPCMessage(nil, encodeHealthCheckRequest(p.service))))
	if err != nil {
		return Unknown, fmt.Errorf("grpc probe: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	req.Header.Set("User-Agent", userAgent)
	resp, err := p.client.Do(req)
	if err != nil {
		return Failure, p.callError(ctx, addr, err)
	}
	// Reading to the end is what makes net/http fill in the trailers.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGRPCResponse+1))
	_ = resp.Body.Close()
	if err != nil {
		return Failure, p.callError(ctx, addr, err)
	}
	status, err := grpcHealthStatus(resp, body)
	var se *grpcStatusError
	switch {
	case errors.As(err, &se) && se.code == grpcUnimplemented:
		return Failure, fmt.Errorf("grpc probe %s: server does not implement grpc.health.v1: %w", addr, err)
	case errors.As(err, &se) && se.code == grpcNotFound:
		return Failure, fmt.Errorf("grpc probe %s: server does not know service %q: %w", addr, p.service, err)
	case err != nil:
		return Failure, fmt.Errorf("grpc probe %s: %w", addr, err)
	}
	if status != grpcServing {
		return Failure, fmt.Errorf("grpc probe %s: service %q is %s", addr, p.service, servingStatusName(status))
	}
	return Success, nil
}

// callError makes a timeout look like one to errors.Is, as the other probers'
// errors do, whatever net/http wrapped it in.
func (p *grpcProber) callError(ctx context.Context, addr string, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("grpc probe %s: %w (%v)", addr, ctx.Err(), err)
	}
	return fmt.Errorf("grpc probe %s: %w", addr, err)
}

// grpcHealthStatus reads a Health/Check answer: an HTTP 200 of a gRPC content
// type whose grpc-status is OK and whose body is one HealthCheckResponse. A
// call that fails without a body sends its status in the headers alone
// ("trailers-only"), which net/http leaves in resp.Header.
func grpcHealthStatus(resp *http.Response, body []byte) (int32, error) {
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: HTTP status %d", errGRPCResponse, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
		return 0, fmt.Errorf("%w: content type %q is not gRPC", errGRPCResponse, truncate(ct, maxGRPCMessage))
	}
	if len(body) > maxGRPCResponse {
		return 0, fmt.Errorf("%w: body longer than %d bytes", errGRPCResponse, maxGRPCResponse)
	}
	code, err := strconv.Atoi(grpcField(resp, "Grpc-Status"))
	switch {
	case err != nil || code < 0 || code >= len(grpcCodeNames):
		return 0, fmt.Errorf("%w: no valid grpc-status", errGRPCResponse)
	case code != grpcOK:
		msg := grpcField(resp, "Grpc-Message")
		if m, err := url.PathUnescape(msg); err == nil { // gRPC percent-encodes it
			msg = m
		}
		return 0, &grpcStatusError{code: code, message: msg}
	}
	return decodeHealthCheckResponse(body)
}

// grpcField reads a gRPC status field from the trailers or, for an answer
// that is trailers-only, from the headers.
func grpcField(resp *http.Response, key string) string {
	if v := resp.Trailer.Get(key); v != "" {
		return v
	}
	return resp.Header.Get(key)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// encodeHealthCheckRequest encodes grpc.health.v1.HealthCheckRequest: field 1,
// the service name, left out when empty as proto3 does.
func encodeHealthCheckRequest(service string) []byte {
	if service == "" {
		return nil
	}
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, service)
}

// appendGRPCMessage frames msg as gRPC does on the wire: an uncompressed flag
// byte, its length as four big-endian bytes, then the message.
func appendGRPCMessage(b, msg []byte) []byte {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(msg)))
	return append(b, msg...)
}

// decodeHealthCheckResponse reads a body of exactly one uncompressed gRPC
// message holding grpc.health.v1.HealthCheckResponse and returns its status
// (field 1); fields it does not know are skipped, as protobuf requires. The
// body comes from the network: anything else is an error, never a panic.
func decodeHealthCheckResponse(body []byte) (int32, error) {
	if len(body) < 5 {
		return 0, fmt.Errorf("%w: %d-byte body, want a length-prefixed message", errGRPCResponse, len(body))
	}
	if body[0] != 0 {
		return 0, fmt.Errorf("%w: message flag %#x, want 0 (uncompressed; the probe offers no compression)", errGRPCResponse, body[0])
	}
	if n := binary.BigEndian.Uint32(body[1:5]); uint64(n) != uint64(len(body)-5) {
		return 0, fmt.Errorf("%w: message of %d bytes in a body of %d, want exactly one message", errGRPCResponse, n, len(body)-5)
	}
	msg := body[5:]
	var status int32
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return 0, fmt.Errorf("%w: %v", errGRPCResponse, protowire.ParseError(n))
		}
		msg = msg[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(msg)
			if n < 0 {
				return 0, fmt.Errorf("%w: status: %v", errGRPCResponse, protowire.ParseError(n))
			}
			status = int32(v) // an enum is an int32 on the wire, as protobuf decodes it
			msg = msg[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, msg)
		if n < 0 {
			return 0, fmt.Errorf("%w: field %d: %v", errGRPCResponse, num, protowire.ParseError(n))
		}
		msg = msg[n:]
	}
	return status, nil
}

// servingStatusName names a HealthCheckResponse status as grpc-go prints it.
func servingStatusName(s int32) string {
	switch s {
	case 0:
		return "UNKNOWN"
	case grpcServing:
		return "SERVING"
	case grpcNotServing:
		return "NOT_SERVING"
	case grpcServiceUnknown:
		return "SERVICE_UNKNOWN"
	}
	return "status " + strconv.Itoa(int(s))
}
