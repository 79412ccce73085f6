package raftzone

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A follower whose configuration lags.
//
// Only servers of a member's own Raft configuration may replicate to it
// (zoneport's RPC guard). A member that was away while the zone added a server, and
// that server then became leader, would refuse its new leader for good: the
// entries that would tell it of that server are what the leader would send.
// The way in is the configuration it does know: when it refuses replication
// from a server outside its configuration while it follows nobody, it asks
// every other voter of its configuration over the peer API whom it follows
// (GET /v1/status). If a majority of the voters of its configuration name that
// server as the leader of that very term and as a voter, the member follows it
// for that term; the entries it then receives bring its configuration up to
// date. A server that is no voter of the zone cannot use this path: a
// majority of honest voters never names it, and one stolen voter is not a
// majority. When the voters the member knows are gone, it stays behind until
// the leader removes it (and an operator restarts it empty; see
// docs/operating.md).

// attestRetry is the least time between two rounds of questions, so a server
// that keeps knocking costs the voters one status request a second at most.
const attestRetry = time.Second

// attestor holds the leaders a majority of this member's configuration
// attested.
type attestor struct {
	s    *Member
	kick chan outsiderClaim

	mu      sync.Mutex
	granted map[string]uint64 // server ID → the term it was attested for
}

// outsiderClaim is a server outside this member's configuration replicating
// at term.
type outsiderClaim struct {
	id   string
	term uint64
}

func newAttestor(s *Member) *attestor {
	return &attestor{s: s, kick: make(chan outsiderClaim, 1), granted: map[string]uint64{}}
}

// attested reports whether id was attested as the leader of term.
func (a *attestor) attested(id string, term uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.granted[id]
	return ok && t == term
}

// outsider asks for a round about id at term; it never blocks.
func (a *attestor) outsider(id string, term uint64) {
	select {
	case a.kick <- outsiderClaim{id: id, term: term}:
	default:
	}
}

// run answers outsider claims until ctx ends.
func (a *attestor) run(ctx context.Context) {
	var last time.Time
	for {
		var c outsiderClaim
		select {
		case <-ctx.Done():
			return
		case c = <-a.kick:
		}
		if a.attested(c.id, c.term) || a.s.follow.LeaderAlive("") {
			// Already settled, or this member follows a live leader of
			// its own configuration: then the claim is no lag.
			continue
		}
		if wait := attestRetry - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		a.round(ctx, c)
	}
}

// round asks the other voters of this member's configuration whom they follow.
func (a *attestor) round(ctx context.Context, c outsiderClaim) {
	s := a.s
	cfg, err := s.configuration()
	if err != nil {
		return
	}
	var voters []string
	total := 0
	for id, srv := range cfg {
		if srv.Suffrage != raft.Voter {
			continue
		}
		total++
		if id != s.serverID {
			voters = append(voters, id)
		}
	}
	need := total/2 + 1
	if len(voters) < need {
		s.log.Warn("a server outside this member's raft configuration replicates to it, and too few voters of its configuration remain to vouch for it",
			"peerID", c.id, "term", c.term, "voters", total)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*s.cfg.RaftHeartbeatTimeout)
	defer cancel()
	votes := make(chan bool, len(voters))
	for _, id := range voters {
		addr := string(cfg[id].Address)
		if m, ok := s.memberByID(id); ok {
			addr = m.RaftAddress
		}
		go func() { votes <- a.vouches(ctx, addr, c) }()
	}
	yes := 0
	for range voters {
		if <-votes {
			yes++
		}
	}
	if yes < need {
		s.metrics.raftRefused.WithLabelValues("attestation_failed").Inc()
		s.log.Warn("a server outside this member's raft configuration replicates to it, and the configuration's voters do not name it leader",
			"peerID", c.id, "term", c.term, "vouched", yes, "need", need)
		return
	}
	a.mu.Lock()
	a.granted[c.id] = c.term
	a.mu.Unlock()
	s.log.Info("following a leader this member's raft configuration does not list yet: a majority of its voters name it",
		"peerID", c.id, "term", c.term, "vouched", yes, "of", len(voters))
}

// vouches reports whether the member at addr names c.id as the voter that
// leads term c.term.
func (a *attestor) vouches(ctx context.Context, addr string, c outsiderClaim) bool {
	var st Status
	if err := a.s.callPeer(ctx, addr, "/v1/status", nil, &st); err != nil {
		return false
	}
	if st.Term != c.term || st.Leader == "" {
		return false
	}
	for _, m := range st.Members {
		if m.Node == st.Leader {
			return m.ServerID == c.id && m.Suffrage == "voter"
		}
	}
	return false
}
