package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
)

// Prober runs one probe of one kind against a host.
//
// Probe is called by many workers at once (one per target) and must be safe for
// concurrent use. ctx carries the spec's timeout as its deadline and is cancelled
// when the target is removed; Probe must return promptly once ctx is done.
//
// The Result says what the probe saw: Success, Failure when the target did not
// answer in time or answered unhealthy, Unknown when the prober itself could not
// do its job (for example it could not build a request). The error explains any
// result other than Success and is nil for Success; it is logged and shown in
// status, never used for decisions.
type Prober interface {
	Probe(ctx context.Context, host string) (Result, error)
}

// kubeletPortKey is the context key of the target's kubelet port.
type kubeletPortKey struct{}

// WithKubeletPort gives the kubelet port a target's Node publishes
// (status.daemonEndpoints) to the probes under ctx; 0 leaves the default. A
// Manager sets it for the workers of a target that has one.
func WithKubeletPort(ctx context.Context, port int) context.Context {
	if port <= 0 {
		return ctx
	}
	return context.WithValue(ctx, kubeletPortKey{}, port)
}

// KubeletPortOf returns the port WithKubeletPort put in ctx, or 0.
func KubeletPortOf(ctx context.Context) int {
	p, _ := ctx.Value(kubeletPortKey{}).(int)
	return p
}

// ProberFunc adapts a function to the Prober interface.
type ProberFunc func(ctx context.Context, host string) (Result, error)

// Probe calls f.
func (f ProberFunc) Probe(ctx context.Context, host string) (Result, error) { return f(ctx, host) }

// ErrNoAgentTransport is returned when a spec of kind agent has no transport to
// run over. The agent probe must go over the authenticated peer connection, which
// only the caller can build, so there is deliberately no fallback to plain HTTP.
var ErrNoAgentTransport = errors.New("agent probes need the agent's peer transport (an *http.Client or a Prober)")

// errBadHost is the Unknown outcome for a host that is not an IP address or a DNS
// name (empty, a host:port, a URL): a caller bug, not evidence about any peer, and
// not something to send packets to.
var errBadHost = errors.New("bad host to probe")

// checkHost accepts an IP address (with an optional IPv6 zone) or a DNS name.
func checkHost(host string) error {
	if host == "" {
		return fmt.Errorf("%w: empty", errBadHost)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return fmt.Errorf("%w: %q is neither an IP address nor a DNS name", errBadHost, host)
		}
	}
	return nil
}

// ProberOptions are what a prober needs from its caller besides the spec.
type ProberOptions struct {
	// AgentClient reaches peers' agents; required for kind agent.
	AgentClient *http.Client
	// Dial opens the probe connections of the tcp, kubelet, http(s) and grpc
	// kinds. Nil means Dialer(nil). The agent binds it to its
	// advertise address so a probe leaves from the node's own IP, as the
	// zone's real traffic does (and firewall rules see it that way).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// NewProber returns the Prober for s. opts.AgentClient is the HTTP client whose
// Transport reaches peers' agents over their authenticated connection; it is
// needed only for KindAgent and ignored otherwise.
func NewProber(s Spec, opts ProberOptions) (Prober, error) {
	agentClient := opts.AgentClient
	dial := opts.Dial
	if dial == nil {
		dial = Dialer(nil).DialContext
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	// A kubelet probe that names no port follows each target's Node.
	perTarget := s.Kind == KindKubelet && s.Port == 0
	s = s.withDefaults()
	switch s.Kind {
	case KindTCP, KindKubelet:
		p := newTCPProber(s, dial)
		p.kubeletPortFromTarget = perTarget
		return p, nil
	case KindHTTP, KindHTTPS:
		return newHTTPProber(s, &http.Client{Transport: newHTTPTransport(s.InsecureSkipVerify, dial)}), nil
	case KindGRPC:
		return newGRPCProber(s, dial), nil
	case KindAgent:
		if agentClient == nil {
			return nil, fmt.Errorf("probe %s: %w", s, ErrNoAgentTransport)
		}
		// Copy the client so our redirect policy does not leak into the
		// caller's other uses of it.
		c := *agentClient
		return newHTTPProber(s, &c), nil
	}
	// Validate has rejected every other kind.
	return nil, fmt.Errorf("probe %s: %w", s, ErrUnknownKind)
}
