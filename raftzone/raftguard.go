package raftzone

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zoneport"
)

// guardRaft admits a peer's Raft connection and hands raft a guarded one (see
// zoneport's rpcguard.go): every RPC must carry the caller's own server ID and address,
// its node must still belong to the zone, elections are heard only from voters
// of this member's configuration, replication only from its servers (or a
// leader its configuration's majority names, attest.go) and only from the
// leader this member follows in that term (zoneport.FollowGuard), terms may not
// leap, and configuration entries and snapshots are checked before
// hashicorp/raft sees them. The caller must be an identified zone member: a
// pinned one under its pinned server ID, or while the cloud's member list is
// up, one its Node registers (a follower's member list may lag the leader's).
func (s *Member) guardRaft(ac *zoneport.Conn) (net.Conn, error) {
	p := ac.Peer
	addr := p.RaftAddress
	if c, ok := s.port.Candidate(p.Node); ok && c.RaftAddress != "" {
		// The cloud's list moves first when a node's address changes; the
		// replicated one follows once the leader reconciles.
		addr = c.RaftAddress
	}
	if addr == "" || p.ServerID == "" {
		return nil, fmt.Errorf("%w: %s has no known zone-port address or server ID", zoneport.ErrRaftCaller, p.Node)
	}
	if hasConfig, _ := s.configured(p.ServerID); hasConfig && !p.Pinned {
		if _, pinned := s.memberByNode(p.Node); pinned {
			// A pinned node under another server ID lost its Raft state:
			// it may rejoin, and speaks Raft once the leader added it.
			return nil, fmt.Errorf("%w: %s claims server ID %s, not its pinned one", zoneport.ErrRaftCaller, p.Node, p.ServerID)
		}
	}
	return zoneport.GuardRaftConn(ac, zoneport.RPCGuard{
		CallerID:   p.ServerID,
		CallerAddr: addr,
		CallerNode: p.Node,
		LocalTerm:  s.raft.CurrentTerm,
		Configured: s.configured,
		Attested:   s.attest.attested,
		Outsider:   s.attest.outsider,
		InZone:     func() bool { return s.port.InZone(p.Node) },
		Follow:     s.follow,
		Forced:     s.forced.Add,
		Reject:     func(reason string) { s.metrics.raftRefused.WithLabelValues(reason).Inc() },
	}), nil
}

// configured reports whether this member has a Raft configuration and id's
// place in it. raft serves the latest configuration from memory.
func (s *Member) configured(id string) (hasConfig bool, place zoneport.Place) {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false, zoneport.PlaceNone
	}
	servers := f.Configuration().Servers
	for _, srv := range servers {
		if string(srv.ID) == id {
			if srv.Suffrage == raft.Voter {
				return true, zoneport.PlaceVoter
			}
			return true, zoneport.PlaceNonvoter
		}
	}
	return len(servers) > 0, zoneport.PlaceNone
}

// newFollowGuard builds this member's FollowGuard on its raft.
func (s *Member) newFollowGuard() *zoneport.FollowGuard {
	return zoneport.NewFollowGuard(zoneport.FollowConfig{
		LocalTerm: s.raft.CurrentTerm,
		Leader: func() (string, time.Time) {
			if s.raft.State() == raft.Leader {
				return s.serverID, time.Now()
			}
			_, id := s.raft.LeaderWithID()
			return string(id), s.raft.LastContact()
		},
		Voted:   s.lastVote,
		Silence: s.cfg.RaftHeartbeatTimeout,
	})
}

// Keys hashicorp/raft keeps its vote under in the stable store (raft.go,
// keyLastVoteTerm and keyLastVoteCand in v1.7.3).
var (
	stableLastVoteTerm = []byte("LastVoteTerm")
	stableLastVoteCand = []byte("LastVoteCand")
)

// lastVote reads the vote raft persisted last: the term and the candidate's
// address.
func (s *Member) lastVote() (term uint64, candidate string, ok bool) {
	term, err := s.boltStore.GetUint64(stableLastVoteTerm)
	if err != nil || term == 0 {
		return 0, "", false
	}
	cand, err := s.boltStore.Get(stableLastVoteCand)
	if err != nil {
		return 0, "", false
	}
	return term, string(cand), true
}
