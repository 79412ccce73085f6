package zoneport

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/peerctx"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// Config describes a member's zone port.
type Config struct {
	// DataDir holds the member's node key (node.key), created on first start.
	DataDir string
	// Node is the member's node name, which it claims in every handshake.
	Node string
	// ServerID is the member's Raft server ID, which it claims in every
	// handshake; its owner (the member) keeps it in the data dir.
	ServerID string
	// Advertise is host:port where peers reach this port.
	Advertise string
	// NodeKey is the member's node key; when nil it is loaded from (or, on
	// first start, created in) DataDir. Tests that play a member set it.
	NodeKey ed25519.PrivateKey
	// Keys are the zone keys the handshake's proof is made and checked with.
	Keys *zonekeys.Ring
	// Network reaches the wire; HostNetwork from Advertise's host if nil.
	Network Network
	// HandshakeTimeout bounds TLS and the zone-key proof of one connection.
	HandshakeTimeout time.Duration
	// Logger receives refused connections and accept errors; slog.Default()
	// if nil.
	Logger *slog.Logger
	// Registerer receives the port's metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Announce is what the member says of its release in every handshake
	// (package skew); a zero Level means this build's level.
	Announce skew.Announcement
}

// Member is the zone member a Port serves, as far as the port needs it: the
// members the zone's replicated state pins, and the decision on a peer's Raft
// connection. The port holds no Raft state of its own.
type Member interface {
	// PinnedStamp is a comparable value that changes whenever the pinned
	// members may have changed (the replica's applied index); the port
	// reads PinnedMembers again only then, or after a short while.
	PinnedStamp() any
	// PinnedMembers returns the pinned members by server ID and by node.
	PinnedMembers() (byID, byNode map[string]zone.Member)
	// AdmitRaft decides whether an authenticated peer may talk Raft to the
	// member and returns the connection raft reads.
	AdmitRaft(c *Conn) (net.Conn, error)
}

// Port is a member's zone port: its TLS identity, the authenticated client
// peers are called with, and, while it serves a member, the listener on
// which Raft and the peer API arrive. It is built before the member so that
// other parts of the agent (its peer probes) hold the client from the start.
type Port struct {
	net     *secureNet
	client  *http.Client
	key     ed25519.PublicKey
	serving atomic.Bool
}

// New prepares the zone port cfg describes: unless cfg.NodeKey is set, it
// loads (or, on first start, creates) the member's node key in cfg.DataDir. candidates is the cluster's
// member list, whose registered node keys let nodes that are not pinned yet
// join.
func New(cfg Config, candidates MemberSource) (*Port, error) {
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{
		{"DataDir (or NodeKey)", cfg.DataDir == "" && cfg.NodeKey == nil}, {"Node", cfg.Node == ""},
		{"ServerID", cfg.ServerID == ""}, {"Advertise", cfg.Advertise == ""}, {"Keys", cfg.Keys == nil},
	} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("zone port config: %s not set", strings.Join(missing, ", "))
	}
	if cfg.HandshakeTimeout <= 0 {
		return nil, fmt.Errorf("zone port handshake timeout %s must be positive", cfg.HandshakeTimeout)
	}
	if cfg.Network == nil {
		host, _, err := net.SplitHostPort(cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("zone port advertise address %q: %w", cfg.Advertise, err)
		}
		cfg.Network = HostNetwork(net.ParseIP(host))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	key := cfg.NodeKey
	if key == nil {
		var err error
		if key, err = LoadOrCreateNodeKey(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	sn, err := newSecureNet(cfg.Network, cfg.Keys, key, cfg.Node, cfg.ServerID, &peerBook{candidates: candidates},
		cfg.Advertise, cfg.HandshakeTimeout, cfg.Logger, newPortMetrics(cfg.Registerer))
	if err != nil {
		return nil, err
	}
	if cfg.Announce.Level != skew.Unannounced {
		sn.self.Level = cfg.Announce.Level
	}
	sn.self.Release = cfg.Announce.Release
	if err := sn.self.Validate(); err != nil {
		return nil, fmt.Errorf("zone port: Config.Announce: %w", err)
	}
	return &Port{net: sn, client: sn.httpClient(), key: key.Public().(ed25519.PublicKey)}, nil
}

// PublicKey is the member's node key, which the agent registers on its own
// Node so that its peers admit it.
func (p *Port) PublicKey() ed25519.PublicKey { return p.key }

// NodeKey is the member's private node key. The member signs its reports,
// attestations and votes with it, and the agent's API writer the zone Lease
// and verdicts while this member leads; nothing leaves the process.
func (p *Port) NodeKey() ed25519.PrivateKey { return p.net.nodeKey }

// ServerID is the Raft server ID this port claims in its handshakes.
func (p *Port) ServerID() string { return p.net.serverID }

// HTTPClient is the authenticated peer-API client: the member calls its
// peers with it, and the agent's `agent` probe kind checks with it that a
// peer's agent is alive and holds the zone key.
func (p *Port) HTTPClient() *http.Client { return p.client }

// DialRaft opens the Raft channel to the member at address (host:port of its
// zone port) as this member, over the authenticated zone port, as raft's
// transport does for its RPCs. It is there for tools that look at a zone's Raft
// traffic and for the tests that play a stolen member: whatever is sent on it
// meets the receiving member's RPC guard like any member's RPCs.
func (p *Port) DialRaft(ctx context.Context, address string) (net.Conn, error) {
	return p.net.dial(ctx, address, channelRaft)
}

// Listen binds the port at bind and accepts peers: peer-API connections go
// to PeerAPI at once, while Raft connections are refused until Serve names
// the member that decides on them. A port listens once.
func (p *Port) Listen(bind string) error {
	if !p.serving.CompareAndSwap(false, true) {
		return errors.New("zone port already listens for a member")
	}
	return p.net.listen(bind)
}

// Serve hands the port the member it serves, once the member's Raft is up:
// from then on the port knows the members it pins and lets it decide on
// Raft connections.
func (p *Port) Serve(m Member) { p.net.book.member.Store(&servedMember{m: m}) }

// Close stops listening, forgets the member and waits for every handshake
// in flight.
func (p *Port) Close() {
	p.net.book.member.Store(nil)
	p.net.close()
}

// RaftStream is raft's stream layer over the port: connections the member
// admitted, and dials that reach only the member the zone knows at an
// address. Valid once Listen succeeded.
func (p *Port) RaftStream() raft.StreamLayer {
	return &streamLayer{channelListener: p.net.raft, sn: p.net}
}

// PeerAPI is the listener of authenticated peer-API connections, for the
// member's HTTP server (with ConnContext). Valid once Listen succeeded.
func (p *Port) PeerAPI() net.Listener { return p.net.peerAPI }

// Candidate returns node's entry in the cluster's member list, if the list
// is available and the node registered a key.
func (p *Port) Candidate(node string) (Candidate, bool) { return p.net.book.candidate(node) }

// InZone reports whether node is in the cluster's member list, or the list
// is unavailable (then only the pinned members count, and they all do).
func (p *Port) InZone(node string) bool { return p.net.book.inZone(node) }

// Reread makes the next connection read the member lists again rather than
// the book's cached view: the member calls it when its own view of the
// cluster changed in a way the pinned stamp does not show.
func (p *Port) Reread() { p.net.book.view.Store(nil) }

// PeerIdleClient is how long the peer-API client keeps an idle connection.
// Connections stay open between probes and reports: a new one costs a TLS
// 1.3 handshake and the zone-key proof, which for a hundred peers probed
// every half minute would be most of an agent's CPU. A server must keep an
// idle connection longer, so that the client always lets go first and never
// sends a request into a connection the server is closing.
const PeerIdleClient = 90 * time.Second

// httpClient returns a client whose connections are authenticated zone-port
// connections on the peer-API channel. URLs use the https scheme and a peer's
// zone-port address.
func (s *secureNet) httpClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				// An agent probe of a peer must reach that peer, not
				// whoever answers at its address (another member
				// forwarding to itself would pass the zone-key proof).
				if node := peerctx.Node(ctx); node != "" && expectedPeer(ctx) == "" {
					ctx = ExpectPeer(ctx, node)
				}
				return s.dial(ctx, addr, channelPeerAPI)
			},
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     PeerIdleClient,
		},
	}
}

// HostNetwork is the production Network: real sockets, outgoing connections
// bound to ip, the advertise address, so that peers (and firewall rules) see
// who calls.
func HostNetwork(ip net.IP) Network { return hostNetwork{ip: ip} }

type hostNetwork struct{ ip net.IP }

func (h hostNetwork) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (h hostNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.ip}}
	return d.DialContext(ctx, network, address)
}
