package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// tcpProber succeeds when a TCP connection opens, like the kubelet's TCP probe:
// it proves the peer's kernel and the listening process are alive, nothing more.
type tcpProber struct {
	port string
	dial func(ctx context.Context, network, address string) (net.Conn, error)
	// kubeletPortFromTarget makes a kubelet probe connect to the port the
	// target's Node publishes (see WithKubeletPort), when it has one.
	kubeletPortFromTarget bool
}

func newTCPProber(s Spec, dial func(ctx context.Context, network, address string) (net.Conn, error)) *tcpProber {
	return &tcpProber{port: strconv.Itoa(s.Port), dial: dial}
}

func (p *tcpProber) Probe(ctx context.Context, host string) (Result, error) {
	if err := checkHost(host); err != nil {
		return Unknown, err
	}
	port := p.port
	if n := KubeletPortOf(ctx); p.kubeletPortFromTarget && n > 0 {
		port = strconv.Itoa(n)
	}
	conn, err := p.dial(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		// Refused, unreachable and timed out all mean the same to a
		// health probe.
		return Failure, fmt.Errorf("tcp probe: %w", err)
	}
	// The connection's only purpose was to open; a close error says nothing
	// about the peer.
	_ = conn.Close()
	return Success, nil
}
