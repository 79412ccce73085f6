package zoneport

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// Errors of peer identification, counted as handshake failures.
var (
	ErrUnknownPeer = errors.New("peer is no member or candidate of this zone")
	ErrPeerKey     = errors.New("peer's certificate key is not the key registered for the node it claims to be")
	ErrPeerID      = errors.New("peer claims another member's server ID")
	ErrWrongPeer   = errors.New("peer is not the node this connection was meant for")
)

// Peer is who is at the other end of an authenticated zone-port
// connection: proven by the certificate key, matched to a node by the pinned
// member list or the node's own registration.
type Peer struct {
	Node string
	Key  ed25519.PublicKey
	// ServerID is the Raft server ID the peer claimed in the handshake; for a
	// pinned member it is the pinned one.
	ServerID string
	// RaftAddress is where the zone knows the peer's zone port: the pinned
	// member's address, else its registration's.
	RaftAddress string
	// Pinned is true when Key is the key pinned in the zone's state. A peer
	// known only from its Node registration may join, nothing more.
	Pinned bool
	// Release and Level are what the peer announced of itself in the
	// handshake (package skew), under the zone key's proof.
	Release string
	Level   skew.Level
}

// peerBook tells the zone port whom to talk to: the pinned members of the
// replicated state (while a member is served) and the candidates of the
// cluster's member list, each with the key registered on its own Node. While
// the cloud is unreachable only the pinned keys count.
type peerBook struct {
	candidates MemberSource
	member     atomic.Pointer[servedMember]
	view       atomic.Pointer[bookView]
}

// servedMember boxes the Member a port serves for atomic.Pointer.
type servedMember struct{ m Member }

// bookRefresh is how long a bookView serves before the member lists are read
// again (sooner when the pinned members may have changed): every accepted
// connection consults the book, and a flood must cost a map lookup each, not
// a walk of a large zone's member list and its keys.
const bookRefresh = 250 * time.Millisecond

// bookView is the book at one moment, indexed for the questions the zone port
// asks.
type bookView struct {
	at     time.Time
	member *servedMember
	stamp  any                    // the member's PinnedStamp when the view was made
	pinned map[string]zone.Member // by node
	byID   map[string]zone.Member // pinned, by server ID
	// cands holds the candidates by node; nil while the list is unavailable.
	cands  map[string]Candidate
	ips    map[netip.Addr]struct{} // every pinned and candidate address
	atPort map[string]string       // zone-port address → node
}

func (b *peerBook) current() *bookView {
	sm := b.member.Load()
	var stamp any
	if sm != nil {
		stamp = sm.m.PinnedStamp()
	}
	if v := b.view.Load(); v != nil && v.member == sm && v.stamp == stamp && time.Since(v.at) < bookRefresh {
		return v
	}
	v := &bookView{at: time.Now(), member: sm, stamp: stamp,
		ips: map[netip.Addr]struct{}{}, atPort: map[string]string{}}
	addIP := func(addr string) {
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			v.ips[ap.Addr().Unmap()] = struct{}{}
		} else if ip, err := netip.ParseAddr(addr); err == nil {
			v.ips[ip.Unmap()] = struct{}{}
		}
	}
	if b.candidates != nil {
		if cs, ok := b.candidates.Candidates(); ok {
			v.cands = make(map[string]Candidate, len(cs))
			for _, c := range cs {
				v.cands[c.Node] = c
				addIP(c.RaftAddress)
				addIP(c.ProbeAddress)
				v.atPort[c.RaftAddress] = c.Node
			}
		}
	}
	if sm != nil {
		// Pinned entries win where the two lists disagree.
		v.byID, v.pinned = sm.m.PinnedMembers()
		for _, m := range v.pinned {
			addIP(m.RaftAddress)
			addIP(m.ProbeAddress)
			v.atPort[m.RaftAddress] = m.Node
		}
	}
	b.view.Store(v)
	return v
}

// identify matches a claimed node, its proven key and its claimed server ID
// against the book.
func (b *peerBook) identify(node, serverID string, key ed25519.PublicKey) (Peer, error) {
	v := b.current()
	id := Peer{Node: node, Key: key, ServerID: serverID}
	if other, ok := v.byID[serverID]; ok && other.Node != node {
		return id, fmt.Errorf("%w: %s claims the server ID of %s", ErrPeerID, node, other.Node)
	}
	c, listed := v.cands[node]
	registered := listed && c.PublicKey != nil && c.PublicKey.Equal(key)
	m, pinned := v.pinned[node]
	if pinned {
		pub, err := zone.ParseNodeKey(m.PublicKey)
		// A member pinned before node keys existed (an upgrade) is
		// vouched for by its Node registration until the leader pins
		// that key (desiredMembers).
		if (err == nil && pub.Equal(key)) || (m.PublicKey == "" && registered) {
			// With another server ID the node lost its Raft state but
			// kept its key: it may rejoin, nothing more until then.
			id.RaftAddress, id.Pinned = m.RaftAddress, serverID == m.ServerID
			return id, nil
		}
	}
	if registered {
		id.RaftAddress = c.RaftAddress
		return id, nil
	}
	if !pinned && !listed {
		return id, fmt.Errorf("%w: %s", ErrUnknownPeer, node)
	}
	return id, fmt.Errorf("%w (%s)", ErrPeerKey, node)
}

// candidate returns node's entry in the cluster's member list, if the list is
// available and the node has a registered key.
func (b *peerBook) candidate(node string) (Candidate, bool) {
	c, ok := b.current().cands[node]
	return c, ok && c.PublicKey != nil
}

// inZone reports whether node is in the cluster's member list, or the list is
// unavailable (then the pinned members count).
func (b *peerBook) inZone(node string) bool {
	v := b.current()
	if v.cands == nil {
		return true
	}
	_, ok := v.cands[node]
	return ok
}

// allowsAddress reports whether ip belongs to a pinned member or a candidate.
// Everyone else is closed before TLS, so an outsider cannot hold the zone
// port's handshake slots.
func (b *peerBook) allowsAddress(ip netip.Addr) bool {
	_, ok := b.current().ips[ip.Unmap()]
	return ok
}

// nodeAt returns the node the zone knows at a zone-port address.
func (b *peerBook) nodeAt(address string) (string, bool) {
	n, ok := b.current().atPort[address]
	return n, ok
}

// callerKey is the context key of the authenticated caller of a peer-API
// request.
type callerKey struct{}

func withCaller(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

// ConnContext is the peer API server's http.Server.ConnContext: every request
// it serves knows who sent it, the peer its connection proved (CallerOf).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if ac, ok := c.(*Conn); ok {
		return withCaller(ctx, ac.Peer)
	}
	return ctx
}

// CallerOf returns the authenticated caller of a peer-API request.
func CallerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(callerKey{}).(Peer)
	return p, ok
}

// expectKey is the context key naming the node a dial must reach.
type expectKey struct{}

// ExpectPeer makes dials under ctx accept only node at the other end.
func ExpectPeer(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, expectKey{}, node)
}

func expectedPeer(ctx context.Context) string {
	n, _ := ctx.Value(expectKey{}).(string)
	return n
}

// Conn is an authenticated zone-port connection and who is at the other
// end.
type Conn struct {
	net.Conn
	Peer Peer
}

// ErrRaftCaller means a peer opened a Raft connection it may not have.
var ErrRaftCaller = errors.New("peer may not send Raft RPCs to this member")

// admitRaft hands an authenticated peer's Raft connection to the member the
// port serves, which decides. Until a member is served nobody may talk Raft.
func (b *peerBook) admitRaft(ac *Conn) (net.Conn, error) {
	sm := b.member.Load()
	if sm == nil {
		return nil, fmt.Errorf("%w: member still starting", ErrRaftCaller)
	}
	return sm.m.AdmitRaft(ac)
}
