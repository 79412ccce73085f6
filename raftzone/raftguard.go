package raftzone

import (
	"fmt"
	"net"
)

// guardRaft admits a peer's Raft connection: a member with a Raft
// configuration talks Raft only with pinned members; a member still waiting to
// be added (no configuration) also with a registered candidate, since the
// leader that adds it is not pinned in its empty state yet.
func (s *Server) guardRaft(ac *authConn) (net.Conn, error) {
	p := ac.peer
	if !p.Pinned && s.inConfiguration() {
		return nil, fmt.Errorf("%w: %s is not a pinned member", errRaftCaller, p.Node)
	}
	return ac, nil
}
