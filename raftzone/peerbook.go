package raftzone

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/edgequorum/edgequorum/zone"
)

// Errors of peer identification, counted as handshake failures.
var (
	errUnknownPeer = errors.New("peer is no member or candidate of this zone")
	errPeerKey     = errors.New("peer's certificate key is not the key registered for the node it claims to be")
	errPeerID      = errors.New("peer claims another member's server ID")
	errWrongPeer   = errors.New("peer is not the node this connection was meant for")
)

// peerIdentity is who is at the other end of an authenticated zone-port
// connection: proven by the certificate key, matched to a node by the pinned
// member list or the node's own registration.
type peerIdentity struct {
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
}

// peerBook tells the zone port whom to talk to: the pinned members of the
// replicated state (once a Server owns the port) and the candidates of the
// cluster's member list, each with the key registered on its own Node. While the
// cloud is unreachable only the pinned keys count.
type peerBook struct {
	candidates MemberSource
	owner      atomic.Pointer[Server]
}

// identify matches a claimed node, its proven key and its claimed server ID
// against the book.
func (b *peerBook) identify(node, serverID string, key ed25519.PublicKey) (peerIdentity, error) {
	id := peerIdentity{Node: node, Key: key, ServerID: serverID}
	known := false
	if s := b.owner.Load(); s != nil {
		if m, ok := s.memberByNode(node); ok {
			known = true
			if pub, err := zone.ParseNodeKey(m.PublicKey); err == nil && pub.Equal(key) {
				id.RaftAddress = m.RaftAddress
				// With another server ID the node lost its Raft state but
				// kept its key: it may rejoin, nothing more until then.
				id.Pinned = serverID == m.ServerID
				return id, nil
			}
			if m.PublicKey == "" {
				// A member pinned before node keys existed (an upgrade):
				// its Node registration speaks for it until the leader
				// pins that key (desiredMembers).
				if c, ok := b.candidate(node); ok && c.PublicKey.Equal(key) {
					id.RaftAddress, id.Pinned = m.RaftAddress, serverID == m.ServerID
					return id, nil
				}
			}
		}
		if other, ok := s.memberByID(serverID); ok && other.Node != node {
			return id, fmt.Errorf("%w: %s claims the server ID of %s", errPeerID, node, other.Node)
		}
	}
	if b.candidates != nil {
		if cs, ok := b.candidates.Candidates(); ok {
			for _, c := range cs {
				if c.Node != node {
					continue
				}
				known = true
				if c.PublicKey != nil && c.PublicKey.Equal(key) {
					id.RaftAddress = c.RaftAddress
					return id, nil
				}
			}
		}
	}
	if !known {
		return id, fmt.Errorf("%w: %s", errUnknownPeer, node)
	}
	return id, fmt.Errorf("%w (%s)", errPeerKey, node)
}

// candidate returns node's entry in the cluster's member list, if the list is
// available and the node has a registered key.
func (b *peerBook) candidate(node string) (Candidate, bool) {
	if b.candidates == nil {
		return Candidate{}, false
	}
	cs, ok := b.candidates.Candidates()
	if !ok {
		return Candidate{}, false
	}
	for _, c := range cs {
		if c.Node == node && c.PublicKey != nil {
			return c, true
		}
	}
	return Candidate{}, false
}

// allowsAddress reports whether ip belongs to a pinned member or a candidate.
// Everyone else is closed before TLS, so an outsider cannot hold the zone
// port's handshake slots.
func (b *peerBook) allowsAddress(ip net.IP) bool {
	match := func(addr string) bool {
		host := addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
		other := net.ParseIP(host)
		return other != nil && other.Equal(ip)
	}
	if s := b.owner.Load(); s != nil {
		_, byNode := s.memberMaps()
		for _, m := range byNode {
			if match(m.RaftAddress) || match(m.ProbeAddress) {
				return true
			}
		}
	}
	if b.candidates != nil {
		if cs, ok := b.candidates.Candidates(); ok {
			for _, c := range cs {
				if match(c.RaftAddress) || match(c.ProbeAddress) {
					return true
				}
			}
		}
	}
	return false
}

// callerKey is the context key of the authenticated caller of a peer-API
// request.
type callerKey struct{}

func withCaller(ctx context.Context, p peerIdentity) context.Context {
	return context.WithValue(ctx, callerKey{}, p)
}

// callerOf returns the authenticated caller of a peer-API request.
func callerOf(ctx context.Context) (peerIdentity, bool) {
	p, ok := ctx.Value(callerKey{}).(peerIdentity)
	return p, ok
}

// expectKey is the context key naming the node a dial must reach.
type expectKey struct{}

// expectPeer makes dials under ctx accept only node at the other end.
func expectPeer(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, expectKey{}, node)
}

func expectedPeer(ctx context.Context) string {
	n, _ := ctx.Value(expectKey{}).(string)
	return n
}

// authConn is an authenticated zone-port connection and who is at the other
// end.
type authConn struct {
	net.Conn
	peer peerIdentity
}

// nodeAt returns the node the zone knows at a zone-port address.
func (b *peerBook) nodeAt(address string) (string, bool) {
	if s := b.owner.Load(); s != nil {
		_, byNode := s.memberMaps()
		for _, m := range byNode {
			if m.RaftAddress == address {
				return m.Node, true
			}
		}
	}
	if b.candidates != nil {
		if cs, ok := b.candidates.Candidates(); ok {
			for _, c := range cs {
				if c.RaftAddress == address {
					return c.Node, true
				}
			}
		}
	}
	return "", false
}

// errRaftCaller means a peer opened a Raft connection it may not have.
var errRaftCaller = errors.New("peer may not send Raft RPCs to this member")

// guardRaft decides whether an authenticated peer may talk Raft to this member
// and returns the connection raft reads. Until a Server owns the port nobody
// may.
func (b *peerBook) guardRaft(ac *authConn) (net.Conn, error) {
	s := b.owner.Load()
	if s == nil {
		return nil, fmt.Errorf("%w: member still starting", errRaftCaller)
	}
	return s.guardRaft(ac)
}
