package raftzone

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

// The zone's word on who leads it, toward the cloud. Raft elects a leader by a
// majority of its voters, but the webhook sees only a zone Lease signed by its
// writer's node key, which any member's key could sign under any term. So the
// leader asks every member to sign, with its own node key, that it leads in
// its term, by that member's own view: its Raft state, or for a spare the
// view it copied from a server. It writes the votes into its Lease renewals,
// and the webhook honours the claim only on a majority of them. A stolen box
// can sign its own vote, no other.

// voteRefresh is how often a leader whose votes are a majority already asks
// the members still missing again: a spare whose view lagged, a member that
// was restarting. Short of a majority it asks them at every renewal.
const voteRefresh = 30 * time.Second

// leaderVoteRequest asks a member to sign that Leader leads in Term.
type leaderVoteRequest struct {
	Term   uint64 `json:"term"`
	Leader string `json:"leader"`
}

// leaderVotes are the votes a leader gathered for its term. Guarded by mu.
type leaderVotes struct {
	mu    sync.Mutex
	term  uint64
	votes map[string]zone.LeaderVote
	// asked is when the members still missing were last asked.
	asked time.Time
}

func (s *Member) handleLeaderVote(w http.ResponseWriter, r *http.Request) {
	var req leaderVoteRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, http.StatusBadRequest, "bad_request", err)
		return
	}
	v, err := s.voteLeader(req.Term, req.Leader)
	if err != nil {
		s.writeError(w, http.StatusConflict, "not_my_leader", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// voteLeader signs that leader leads the zone in term, if this member's own
// view says so.
func (s *Member) voteLeader(term uint64, leader string) (zone.LeaderVote, error) {
	curTerm, curLeader := s.viewOfLeader()
	if term == 0 || term != curTerm || leader != curLeader {
		return zone.LeaderVote{}, fmt.Errorf("member %s sees %q lead term %d, not %q term %d", s.cfg.Node, curLeader, curTerm, leader, term)
	}
	v := zone.LeaderVote{Zone: s.cfg.Zone, Term: term, Leader: leader, Signer: s.cfg.Node}
	v.Sign(s.port.NodeKey())
	return v, nil
}

// viewOfLeader is the term and the leader's node name as this member knows
// them: a Raft server from its own Raft state, a spare from the view it copied
// from a server. An election in progress names no leader.
func (s *Member) viewOfLeader() (uint64, string) {
	if !s.isStarted() {
		return 0, ""
	}
	if s.state() == s.viewStore {
		c := s.cluster()
		return c.Term, c.Leader
	}
	term := s.raft.CurrentTerm()
	node, _, ok := s.Leader()
	// A term that moved while the leader was read may not be that
	// leader's.
	if !ok || s.raft.CurrentTerm() != term {
		return 0, ""
	}
	return term, node
}

// Leadership returns the term this member leads in (0 when it does not) and
// the votes of the members that say so, its own included, by signer. It asks
// the members whose vote it lacks, in parallel and within gatherTimeout, while
// their votes are short of a majority of the members, and every voteRefresh
// after.
func (s *Member) Leadership(ctx context.Context) (uint64, []zone.LeaderVote) {
	term := s.leadership.Term()
	if term == 0 {
		return 0, nil
	}
	members, err := s.state().Members()
	if err != nil {
		s.log.Info("leader votes: members not read", "err", err)
		return term, nil
	}
	now := s.clock.Now()
	s.votes.mu.Lock()
	if s.votes.term != term {
		s.votes.term, s.votes.votes, s.votes.asked = term, map[string]zone.LeaderVote{}, time.Time{}
	}
	if _, ok := s.votes.votes[s.cfg.Node]; !ok {
		if v, err := s.voteLeader(term, s.cfg.Node); err == nil {
			s.votes.votes[s.cfg.Node] = v
		}
	}
	var missing []zone.Member
	for _, m := range members {
		if _, ok := s.votes.votes[m.Node]; !ok && m.Node != s.cfg.Node && m.RaftAddress != "" {
			missing = append(missing, m)
		}
	}
	short := len(s.votes.votes) < len(members)/2+1
	ask := len(missing) > 0 && (short || now.Sub(s.votes.asked) >= voteRefresh)
	if ask {
		s.votes.asked = now
	}
	s.votes.mu.Unlock()
	if ask {
		s.askVotes(ctx, term, missing)
	}
	s.votes.mu.Lock()
	defer s.votes.mu.Unlock()
	if s.votes.term != term {
		return term, nil
	}
	return term, slices.SortedFunc(maps.Values(s.votes.votes), func(a, b zone.LeaderVote) int { return strings.Compare(a.Signer, b.Signer) })
}

// askVotes asks members for their vote that this member leads in term and
// keeps those that come back, signed by the member asked for this zone, term
// and leader. Whether each verifies is the webhook's to check.
func (s *Member) askVotes(ctx context.Context, term uint64, members []zone.Member) {
	lost := s.eachMember(ctx, members, func(ctx context.Context, m zone.Member) bool {
		var v zone.LeaderVote
		err := s.callPeer(ctx, m.RaftAddress, "/v1/leader-vote", leaderVoteRequest{Term: term, Leader: s.cfg.Node}, &v)
		if err != nil || v.Zone != s.cfg.Zone || v.Term != term || v.Leader != s.cfg.Node || v.Signer != m.Node {
			return false
		}
		s.votes.mu.Lock()
		defer s.votes.mu.Unlock()
		if s.votes.term == term {
			s.votes.votes[m.Node] = v
		}
		return true
	})
	if len(lost) > 0 {
		s.log.Debug("leader votes: members did not vote for this term yet", "term", term, "peers", strings.Join(lost, ","))
	}
}
