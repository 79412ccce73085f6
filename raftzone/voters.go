package raftzone

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/raftzone/seats"
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

func (s *Member) replica() replicaState {
	return replicaState{ServerID: s.serverID, LastIndex: s.raft.LastIndex(), AppliedIndex: s.raft.AppliedIndex()}
}

// checkCandidate asks a nonvoter, right before its promotion, whether it is alive
// and caught up. Committed reports say only that it was alive up to a vote
// timeout ago; promoting a member that died since can cost the zone its quorum
// for good — a zone growing from one voter to two with the second dead can
// neither commit nor elect a leader until that node returns.
func (s *Member) checkCandidate(ctx context.Context, m zone.Member) error {
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

// classifySeats classifies every member for the planners from what the
// replica says now.
func (s *Member) classifySeats(p *seats.Promoter, members []zone.Member, cfg map[string]raft.Server) ([]seats.Seat, error) {
	verdicts, err := s.store.Verdicts()
	if err != nil {
		return nil, err
	}
	return p.Classify(seats.Inputs{
		Now: s.clock.Now(), Self: s.cfg.Node, SelfAPI: s.reachesAPI(),
		Members: members, Config: cfg, LastReports: s.lastReports(), Verdicts: verdicts,
		VoteTimeout: s.cfg.VoteTimeout, DeadVoterTimeout: s.cfg.DeadVoterTimeout,
	}), nil
}

// balanceVoters keeps seats.DesiredVoters voters (seats.PlanVoters decides who) and applies
// the plan: promotions first, each only after the candidate answers its live
// check (checkCandidate), then demotions. It returns whether the zone is short
// of voters it could have, so the caller looks again soon.
func (s *Member) balanceVoters(ctx context.Context, p *seats.Promoter, members []zone.Member, cfg map[string]raft.Server) (short bool, err error) {
	ss, err := s.classifySeats(p, members, cfg)
	if err != nil {
		return false, err
	}
	byID := make(map[string]zone.Member, len(members))
	for _, m := range members {
		byID[m.ServerID] = m
	}
	plan := seats.PlanVoters(ss, seats.DesiredVoters(len(members), s.cfg.Voters), func(c seats.Seat) bool {
		if ctx.Err() != nil {
			return false
		}
		if err := s.checkCandidate(ctx, byID[c.ID]); err != nil {
			s.metrics.membershipChanges.WithLabelValues("promote_skipped").Inc()
			s.log.Info("not promoting member that fails its live check", "peer", c.Node, "err", err)
			return false
		}
		return true
	})
	if err := ctx.Err(); err != nil {
		return false, err
	}
	for _, c := range plan.Promote {
		if err := s.raft.AddVoter(raft.ServerID(c.ID), raft.ServerAddress(byID[c.ID].RaftAddress), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("promote %s: %w", c.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("promote").Inc()
		s.log.Info("promoted member to voter", "peer", c.Node, "apiReachable", c.API)
	}
	for _, c := range plan.Demote {
		if err := s.raft.DemoteVoter(raft.ServerID(c.ID), 0, configChangeTimeout).Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return false, err
			}
			return false, fmt.Errorf("demote %s: %w", c.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("demote").Inc()
		s.log.Info("demoted voter", "peer", c.Node, "dead", c.Dead, "unhealthy", c.Unhealthy, "apiReachable", c.API)
	}
	return plan.Short, nil
}

// balanceStandbys keeps seats.DesiredStandbys stand-bys (seats.PlanStandbys decides who):
// a spare becomes a stand-by by joining the configuration as a nonvoter, which
// replicates the zone's state to it; a stand-by beyond the plan leaves the
// configuration and is a spare again. It returns whether the zone lacks
// servers for the voters it wants, so the caller looks again soon.
func (s *Member) balanceStandbys(ctx context.Context, p *seats.Promoter, members []zone.Member, cfg map[string]raft.Server) (short bool, err error) {
	ss, err := s.classifySeats(p, members, cfg)
	if err != nil {
		return false, err
	}
	voters := 0
	for _, st := range ss {
		if st.Voter {
			voters++
		}
	}
	add, remove := seats.PlanStandbys(ss, seats.DesiredStandbys(len(members), voters, s.cfg.Voters, s.cfg.Standbys))
	byID := make(map[string]zone.Member, len(members))
	for _, m := range members {
		byID[m.ServerID] = m
	}
	for _, c := range add {
		if err := s.raft.AddNonvoter(raft.ServerID(c.ID), raft.ServerAddress(byID[c.ID].RaftAddress), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("add %s as stand-by: %w", c.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("add_nonvoter").Inc()
		s.log.Info("spare is a stand-by now", "peer", c.Node, "apiReachable", c.API)
	}
	for _, c := range remove {
		if err := s.raft.RemoveServer(raft.ServerID(c.ID), 0, configChangeTimeout).Error(); err != nil {
			return false, fmt.Errorf("make stand-by %s a spare: %w", c.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("remove_standby").Inc()
		s.log.Info("stand-by is a spare now", "peer", c.Node, "eligible", c.Eligible, "apiReachable", c.API)
	}
	return voters < seats.DesiredVoters(len(members), s.cfg.Voters) && len(add) > 0, nil
}
