package raftzone

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// desiredVoters is the voter count for a zone of m members: every member while
// the zone is no larger than --voters (which is odd), else --voters. A small zone
// of even size therefore has an even voter set, on purpose: when it splits in
// half neither half can commit, and neither half should judge the other dead —
// from inside a split there is no telling which half failed.
func desiredVoters(m, limit int) int {
	return max(min(m, limit), 1)
}

// promoter remembers, for one leadership term, since when each voter has looked
// unhealthy, so a voter is replaced only after --dead-voter-timeout.
type promoter struct {
	unhealthySince map[string]time.Time
}

func newPromoter() *promoter { return &promoter{unhealthySince: map[string]time.Time{}} }

// memberHealth is what the promoter knows of a member.
type memberHealth struct {
	m       zone.Member
	voter   bool
	healthy bool
	api     bool
}

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

// balanceVoters keeps desiredVoters voters, preferring members that are healthy
// and reach the apiserver. It promotes before it demotes, so a replacement never
// lowers the zone's fault tolerance in between, and promotes only members that
// answer a live check (checkCandidate).
func (s *Server) balanceVoters(ctx context.Context, p *promoter, members []zone.Member, cfg map[string]raft.Server) error {
	now := s.clock.Now()
	last := s.lastReports()
	verdicts, err := s.store.Verdicts()
	if err != nil {
		return err
	}
	var hs []memberHealth
	for _, m := range members {
		srv, ok := cfg[m.ServerID]
		if !ok {
			continue
		}
		h := memberHealth{m: m, voter: srv.Suffrage == raft.Voter}
		if m.Node == s.cfg.Node {
			h.healthy, h.api = true, s.deps.APIHealth.Reachable()
		} else if lr, ok := last[m.Node]; ok && now.Sub(lr.ReceivedAt) <= s.cfg.VoteTimeout {
			h.healthy = verdicts[m.Node].State != zone.Unhealthy
			h.api = lr.APIReachable
		}
		if h.voter && !h.healthy {
			if _, ok := p.unhealthySince[m.ServerID]; !ok {
				p.unhealthySince[m.ServerID] = now
			}
		} else {
			delete(p.unhealthySince, m.ServerID)
		}
		hs = append(hs, h)
	}
	want := desiredVoters(len(hs), s.cfg.Voters)
	var voters, spares []memberHealth
	dead := 0
	for _, h := range hs {
		switch {
		case h.voter:
			voters = append(voters, h)
			if since, ok := p.unhealthySince[h.m.ServerID]; ok && now.Sub(since) >= s.cfg.DeadVoterTimeout {
				dead++
			}
		case h.healthy:
			spares = append(spares, h)
		}
	}
	// Best spares first: reach the apiserver, then longest-standing, then name.
	slices.SortFunc(spares, func(a, b memberHealth) int {
		if a.api != b.api {
			if a.api {
				return -1
			}
			return 1
		}
		if c := a.m.JoinedAt.Compare(b.m.JoinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.m.Node, b.m.Node)
	})
	need := max(0, want-len(voters)+dead)
	var ready []memberHealth
	for _, h := range spares {
		if len(ready) >= need {
			break
		}
		if err := s.checkCandidate(ctx, h.m); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.metrics.membershipChanges.WithLabelValues("promote_skipped").Inc()
			s.log.Info("not promoting member that fails its live check", "peer", h.m.Node, "err", err)
			continue
		}
		ready = append(ready, h)
	}
	promote := len(ready)
	// Grow from an odd voter count in pairs: an even count below the target
	// tolerates no more failures than one voter fewer, but has one more node
	// whose death costs the quorum — two voters are the worst case, where
	// either death stalls the zone. A replacement's demotion follows at once.
	if n := len(voters) + promote; promote > 0 && dead == 0 && n%2 == 0 && n < want {
		promote--
	}
	for _, h := range ready[:promote] {
		if err := s.raft.AddVoter(raft.ServerID(h.m.ServerID), raft.ServerAddress(h.m.RaftAddress), 0, configChangeTimeout).Error(); err != nil {
			return fmt.Errorf("promote %s: %w", h.m.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("promote").Inc()
		s.log.Info("promoted member to voter", "peer", h.m.Node, "apiReachable", h.api)
		voters = append(voters, memberHealth{m: h.m, voter: true, healthy: true, api: h.api})
	}
	// Demote the worst voters beyond want: dead first, then unhealthy, then
	// those that cannot reach the apiserver. Never ourselves.
	excess := len(voters) - want
	if excess <= 0 {
		return nil
	}
	rank := func(h memberHealth) int {
		if since, ok := p.unhealthySince[h.m.ServerID]; ok {
			if now.Sub(since) >= s.cfg.DeadVoterTimeout {
				return 0
			}
			return 1
		}
		if !h.api {
			return 2
		}
		return 3
	}
	slices.SortStableFunc(voters, func(a, b memberHealth) int { return rank(a) - rank(b) })
	for _, h := range voters {
		if excess == 0 {
			break
		}
		if h.m.ServerID == s.serverID {
			continue
		}
		if err := s.raft.DemoteVoter(raft.ServerID(h.m.ServerID), 0, configChangeTimeout).Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return err
			}
			return fmt.Errorf("demote %s: %w", h.m.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("demote").Inc()
		s.log.Info("demoted voter", "peer", h.m.Node, "rank", rank(h))
		excess--
	}
	return nil
}
