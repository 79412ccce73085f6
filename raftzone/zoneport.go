package raftzone

import (
	"context"
	"crypto/ed25519"
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
	key    ed25519.PublicKey
	owned  atomic.Bool
}

// NewZonePort prepares the zone port cfg describes: it loads (or, on first
// start, creates) the member's node key and server ID in cfg.DataDir. members
// is the cluster's member list, whose registered node keys let nodes that are
// not pinned yet join. Its metrics are registered with cfg.Registerer.
func NewZonePort(cfg Config, members MemberSource) (*ZonePort, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	key, err := LoadOrCreateNodeKey(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	id, err := loadOrCreateServerID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("node", cfg.Node, "zone", cfg.Zone)
	sn, err := newSecureNet(cfg.Network, cfg.Keys, key, cfg.Node, id, &peerBook{candidates: members},
		cfg.raftAddress(), cfg.HandshakeTimeout, log, newPortMetrics(cfg.Registerer))
	if err != nil {
		return nil, err
	}
	return &ZonePort{net: sn, client: sn.httpClient(), key: key.Public().(ed25519.PublicKey)}, nil
}

// PublicKey is the member's node key, which the agent registers on its own
// Node so that its peers admit it.
func (p *ZonePort) PublicKey() ed25519.PublicKey { return p.key }

// NodeKey is the member's private node key. The agent's API writer signs the
// zone Lease and verdicts with it while this member leads; nothing leaves the
// process.
func (p *ZonePort) NodeKey() ed25519.PrivateKey { return p.net.nodeKey }

// HTTPClient is the authenticated peer-API client; the agent's `agent` probe kind
// uses it to check that a peer's agent is alive and holds the zone key.
func (p *ZonePort) HTTPClient() *http.Client { return p.client }

// DialRaft opens the Raft channel to the member at address (host:port of its
// zone port) as this member, over the authenticated zone port, as raft's
// transport does for its RPCs. It is there for tools that look at a zone's Raft
// traffic and for the tests that play a stolen member: whatever is sent on it
// meets the receiving member's RPC guard like any member's RPCs.
func (p *ZonePort) DialRaft(ctx context.Context, address string) (net.Conn, error) {
	return p.net.dial(ctx, address, channelRaft)
}

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
