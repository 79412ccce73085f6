package raftzone

import (
	"fmt"
	"net"
)

// guardRaft admits a peer's Raft connection and hands raft a guarded one (see
// rpcguard.go): every RPC must carry the caller's own server ID and address,
// elections are heard only from servers of this member's configuration, terms
// may not leap, and configuration entries and snapshots are checked before
// hashicorp/raft sees them. The caller must be an identified zone member: a
// pinned one, or while the cloud's member list is up, one its Node registers
// (a follower's member list may lag the leader's).
func (s *Server) guardRaft(ac *authConn) (net.Conn, error) {
	p := ac.peer
	addr := p.RaftAddress
	if c, ok := s.net.book.candidate(p.Node); ok && c.RaftAddress != "" {
		// The cloud's list moves first when a node's address changes; the
		// replicated one follows once the leader reconciles.
		addr = c.RaftAddress
	}
	if addr == "" || p.ServerID == "" {
		return nil, fmt.Errorf("%w: %s has no known zone-port address or server ID", errRaftCaller, p.Node)
	}
	return guardRaftConn(ac, rpcGuard{
		CallerID:   p.ServerID,
		CallerAddr: addr,
		LocalTerm:  s.raft.CurrentTerm,
		Configured: s.configured,
		Reject:     func(reason string) { s.metrics.raftRefused.WithLabelValues(reason).Inc() },
	}), nil
}

// configured reports whether this member has a Raft configuration and whether
// id is a server in it. raft serves the latest configuration from memory.
func (s *Server) configured(id string) (hasConfig, member bool) {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false, false
	}
	servers := f.Configuration().Servers
	for _, srv := range servers {
		if string(srv.ID) == id {
			return true, true
		}
	}
	return len(servers) > 0, false
}
