package raftzone

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
)

// ZonePort is a member's zone port before it listens: its TLS identity and the
// authenticated client peers are called with. It is built before the Server so
// that other parts of the member (the agent's peer probes) hold that client
// from the start, and handed to the Server, which listens on it while it runs.
type ZonePort struct {
	net    *secureNet
	client *http.Client
	owned  atomic.Bool
}

// NewZonePort prepares the zone port cfg describes. Its metrics are registered
// with cfg.Registerer.
func NewZonePort(cfg Config) (*ZonePort, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger.With("node", cfg.Node, "zone", cfg.Zone)
	sn, err := newSecureNet(cfg.Network, cfg.Keys, cfg.raftAddress(), cfg.HandshakeTimeout, log, newPortMetrics(cfg.Registerer))
	if err != nil {
		return nil, err
	}
	return &ZonePort{net: sn, client: sn.httpClient()}, nil
}

// HTTPClient is the authenticated peer-API client; the agent's `agent` probe kind
// uses it to check that a peer's agent is alive and holds the zone key.
func (p *ZonePort) HTTPClient() *http.Client { return p.client }

// claim binds p to one Server: one port has one listener.
func (p *ZonePort) claim() error {
	if !p.owned.CompareAndSwap(false, true) {
		return errors.New("raftzone: Deps.Port already belongs to another Server")
	}
	return nil
}

// hostNetwork is the production Network: real sockets, outgoing connections
// bound to the advertise address so peers (and firewall rules) see who calls.
type hostNetwork struct{ ip net.IP }

func (h hostNetwork) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (h hostNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.ip}}
	return d.DialContext(ctx, network, address)
}
