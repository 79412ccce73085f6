package raftzone

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// leadershipLoop starts leader duties when this member wins leadership and stops
// them when it loses it.
func (s *Member) leadershipLoop(ctx context.Context) {
	var stopLeading func()
	defer func() {
		if stopLeading != nil {
			stopLeading()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case leader := <-s.raft.LeaderCh():
			if stopLeading != nil {
				stopLeading()
				stopLeading = nil
			}
			s.paceHeartbeats(leader)
			if leader {
				stopLeading = s.startLeading(ctx)
			} else {
				s.log.Info("lost zone leadership")
			}
		}
	}
}

// paceHeartbeats sets raft's HeartbeatTimeout: while this member leads, five
// times RaftHeartbeatInterval, so that hashicorp/raft, which heartbeats every
// tenth to fifth of it, leaves an idle follower at most that interval; as a
// follower again, the configured timeout, which decides how soon a dead
// leader is noticed. ElectionTimeout must not be shorter (raft validates it);
// a leader uses it only to give up a leadership transfer.
func (s *Member) paceHeartbeats(leading bool) {
	rc := s.raft.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = s.cfg.RaftHeartbeatTimeout, s.cfg.RaftElectionTimeout
	if leading {
		rc.HeartbeatTimeout = 5 * s.cfg.leaderHeartbeatInterval()
		rc.ElectionTimeout = max(rc.ElectionTimeout, rc.HeartbeatTimeout)
	}
	if err := s.raft.ReloadConfig(rc); err != nil {
		s.log.Warn("pace raft heartbeats", "leading", leading, "err", err)
	}
}

// startLeading runs lead until the returned function is called; that function
// also clears the fencing term, so nothing is written under a lost term.
func (s *Member) startLeading(ctx context.Context) func() {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.lead(lctx)
	}()
	return func() {
		s.leadership.end()
		cancel()
		<-done
		s.leadership.end()
		s.metrics.isLeader.Set(0)
	}
}

// lead runs while this member leads. A Barrier first makes sure every entry of
// earlier terms is applied, so verdicts continue from what the previous leader
// committed instead of flapping.
func (s *Member) lead(ctx context.Context) {
	if err := s.raft.Barrier(10 * time.Second).Error(); err != nil {
		s.log.Warn("leader barrier failed; stepping back", "err", err)
		return
	}
	term := s.raft.CurrentTerm()
	if s.raft.State() != raft.Leader {
		return
	}
	if ms, err := s.store.Members(); err == nil {
		s.leadership.setZoneSize(ms)
	}
	s.leadership.begin(term, func(ctx context.Context) error { return s.confirmTerm(ctx, term) })
	s.metrics.isLeader.Set(1)
	s.metrics.term.Set(float64(term))
	s.log.Info("leading zone", "term", term)

	if s.deps.Sink != nil {
		if vs, err := s.store.Verdicts(); err == nil {
			s.deps.Sink.Verdicts(term, sortedVerdicts(vs), true)
		}
	}
	var wg sync.WaitGroup
	for _, f := range []func(context.Context, uint64){s.voteLoop, s.reconcileLoop, s.placementLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx, term) }()
	}
	wg.Wait()
}

// Term returns the fencing term while this member leads, or 0.
func (s *Member) Term() uint64 { return s.leadership.Term() }

// VerifyLeader confirms with a quorum that this member still leads and returns
// the term its writes must carry (see Leadership.VerifyLeader).
func (s *Member) VerifyLeader(ctx context.Context) (uint64, error) {
	return s.leadership.VerifyLeader(ctx)
}

// confirmTerm asks a quorum whether this member still leads in term.
func (s *Member) confirmTerm(ctx context.Context, term uint64) error {
	if err := waitFuture(ctx, s.raft.VerifyLeader(), s.cfg.RaftElectionTimeout*2); err != nil {
		return err
	}
	if s.raft.CurrentTerm() != term {
		return fmt.Errorf("raft moved on to term %d", s.raft.CurrentTerm())
	}
	return nil
}

// CommittedVerdict returns the zone's committed verdict on node while this
// member leads, so the leader can put back an annotation the API lost. ok is
// false on a follower and for a node the zone has not judged.
func (s *Member) CommittedVerdict(node string) (v zone.Verdict, ok bool) {
	// A term is set only once Run has opened the store, and the atomic
	// load orders this read after it.
	if s.leadership.Term() == 0 {
		return zone.Verdict{}, false
	}
	v, err := s.store.Verdict(node)
	return v, err == nil
}

// Leader returns the node name and zone-port address of the current leader, if
// one is known.
func (s *Member) Leader() (node, address string, ok bool) {
	if !s.isStarted() {
		return "", "", false
	}
	if s.state() == s.viewStore {
		c := s.cluster()
		return c.Leader, c.LeaderAddress, c.LeaderAddress != ""
	}
	addr, id := s.raft.LeaderWithID()
	if id == "" {
		return "", "", false
	}
	if m, found := s.memberByID(string(id)); found {
		return m.Node, m.RaftAddress, true
	}
	return "", string(addr), addr != ""
}
