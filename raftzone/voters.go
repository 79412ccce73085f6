package raftzone

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// maxPromotionLag is how many log entries a nonvoter may trail the leader's
// last index and still be promoted: the configuration entry that makes it a
// voter needs its acknowledgement to commit, so a replica still catching up
// would hold every commit of the zone hostage until it has.
const maxPromotionLag = 64

// replicaState is what a member tells the leader about its replica before the
// leader gives it a vote (GET /v1/replica on the peer API).
type replicaState struct {
	ServerID     string `json:"serverID"`
	LastIndex    uint64 `json:"lastIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
}

func (s *Server) replica() replicaState {
	return replicaState{ServerID: s.serverID, LastIndex: s.raft.LastIndex(), AppliedIndex: s.raft.AppliedIndex()}
}

// checkCandidate asks a nonvoter, right before its promotion, whether it is alive
// and caught up. Committed reports say only that it was alive up to a vote
// timeout ago; promoting a member that died since can cost the zone its quorum
// for good — a zone growing from one voter to two with the second dead can
// neither commit nor elect a leader until that node returns.
func (s *Server) checkCandidate(ctx context.Context, m zone.Member) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RaftHeartbeatTimeout)
	defer cancel()
	var rs replicaState
	if err := s.callPeer(ctx, m.RaftAddress, "/v1/replica", nil, &rs); err != nil {
		return fmt.Errorf("ask %s for its replica state: %w", m.Node, err)
	}
	if rs.ServerID != m.ServerID {
		return fmt.Errorf("%s answers as server %s, the member list says %s", m.Node, rs.ServerID, m.ServerID)
	}
	if last := s.raft.LastIndex(); rs.LastIndex+maxPromotionLag < last {
		return fmt.Errorf("%s is %d log entries behind", m.Node, last-rs.LastIndex)
	}
	return nil
}

// seats classifies every member for the planners from what the replica says
// now.
func (s *Server) seats(p *promoter, members []zone.Member, cfg map[string]raft.Server) ([]seat, error) {
	verdicts, err := s.store.Verdicts()
	if err != nil {
		return nil, err
	}
	return p.classify(voterInputs{
		now: s.clock.Now(), self: s.cfg.Node, selfAPI: s.reachesAPI(),
		members: members, config: cfg, lastReports: s.lastReports(), verdicts: verdicts,
		voteTimeout: s.cfg.VoteTimeout, deadVoterTimeout: s.cfg.DeadVoterTimeout,
	}), nil
}

// balanceVoters keeps desiredVoters voters (planVoters decides who) and applies
// the plan: promotions first, each only after the candidate answers its live
// check (checkCandidate), then demotions. It returns whether the zone is short
// of voters it could have, so the caller looks again soon.
func (s *Server) balanceVoters(ctx context.Context, p *promoter, members []zone.Member, cfg map[string]raft.Server) (short bool, err error) {
	seats, err := s.seats(p, members, cfg)
	if err != nil {
		return false, err
	}
	byID := make(map[string]zone.Member, len(members))
	for _, m := range members {
		byID[m.ServerID] = m
	}
	plan := planVoters(seats, desiredVoters(len(members), s.cfg.Voters), func(c seat) bool {
		if ctx.Err() != nil {
			return false
		}
		if err := s.checkCandidate(ctx, byID[c.id]); err != nil {
			s.metrics.membershipChanges.WithLabelValues("promote_skipped").Inc()
			s.log.Info("not promoting member that fails its live check", "peer", c.node, "err", err)
			return false
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return false, err
	}
	for _, c := range plan.promote {
		if err := s.raft.AddVoter(raft.ServerID(c.id), raft.ServerAddress(byID[c.id].RaftAddress), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("promote %s: %w", c.node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("promote").Inc()
		s.log.Info("promoted member to voter", "peer", c.node, "apiReachable", c.api)
	}
	for _, c := range plan.demote {
		if err := s.raft.DemoteVoter(raft.ServerID(c.id), 0, configChangeTimeout).Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return false, err
			}
			return false, fmt.Errorf("demote %s: %w", c.node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("demote").Inc()
		s.log.Info("demoted voter", "peer", c.node, "dead", c.dead, "unhealthy", c.unhealthy, "apiReachable", c.api)
	}
	return plan.short, nil
}

// balanceStandbys keeps desiredStandbys stand-bys (planStandbys decides who):
// a spare becomes a stand-by by joining the configuration as a nonvoter, which
// replicates the zone's state to it; a stand-by beyond the plan leaves the
// configuration and is a spare again. It returns whether the zone lacks
// servers for the voters it wants, so the caller looks again soon.
func (s *Server) balanceStandbys(ctx context.Context, p *promoter, members []zone.Member, cfg map[string]raft.Server) (short bool, err error) {
	seats, err := s.seats(p, members, cfg)
	if err != nil {
		return false, err
	}
	voters := 0
	for _, st := range seats {
		if st.voter {
			voters++
		}
	}
	add, remove := planStandbys(seats, desiredStandbys(len(members), voters, s.cfg.Voters, s.cfg.Standbys))
	byID := make(map[string]zone.Member, len(members))
	for _, m := range members {
		byID[m.ServerID] = m
	}
	for _, c := range add {
		if err := s.raft.AddNonvoter(raft.ServerID(c.id), raft.ServerAddress(byID[c.id].RaftAddress), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("add %s as stand-by: %w", c.node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("add_nonvoter").Inc()
		s.log.Info("spare is a stand-by now", "peer", c.node, "apiReachable", c.api)
	}
	for _, c := range remove {
		if err := s.raft.RemoveServer(raft.ServerID(c.id), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("make stand-by %s a spare: %w", c.node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("remove_standby").Inc()
		s.log.Info("stand-by is a spare now", "peer", c.node, "eligible", c.eligible, "apiReachable", c.api)
	}
	return voters < desiredVoters(len(members), s.cfg.Voters) && len(add) > 0, nil
}
