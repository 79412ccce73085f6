package raftzone

import (
	"sync"
	"sync/atomic"
	"time"
)

// A leader that commits nothing.
//
// A stolen voter that wins an election (it can force one, zoneport.FollowGuard) and
// then commits nothing stalls its zone: no member's report is committed, no
// verdict changes, and Raft, which only sees its heartbeats, keeps it as
// leader. Every member therefore watches its own reports in its own replica —
// not the leader's answers, which a thief can fake: when the leader it follows
// has committed none of them for the stall timeout, it stops following that
// leader for that term. It then hears from it no more, times out and
// campaigns, and once a majority starved likewise the zone elects another
// leader. The thief can force another election, five per ten minutes, each
// costing the zone a stall timeout: bounded, counted
// (edgequorum_raft_leader_stalls_total, edgequorum_raft_forced_elections_total)
// and shown by `edgequorum status`.

// stallTimeout is how long a member's reports may go uncommitted by the leader
// it follows before it stops following it: three vote timeouts, after which a
// member's opinions have long stopped counting.
func (s *Member) stallTimeout() time.Duration { return 3 * s.cfg.VoteTimeout }

// stallWatch follows one member's reports to the leader it follows.
type stallWatch struct {
	// seq is the member's own last seq its replica held at the last look.
	seq atomic.Uint64

	mu sync.Mutex
	// term and leader are whom the member followed when since was set.
	term   uint64
	leader string
	// since is when the member began waiting for that leader to commit a
	// report: the leader's first sight, or its last committed report.
	since time.Time
	// waiting is what the last report found; stalled is the last leader the
	// member stopped following. Both for status.
	waiting     time.Duration
	stalled     string
	stalledTerm uint64
}

// reported records the outcome of one report and returns how long the member's
// reports have gone uncommitted, and whether the leader it follows is to be
// given up now. A member that leads, or follows nobody, waits for no one.
func (w *stallWatch) reported(now time.Time, term uint64, leader string, committed bool, timeout time.Duration) (waiting time.Duration, stall bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if leader == "" {
		w.term, w.leader, w.since, w.waiting = 0, "", time.Time{}, 0
		return 0, false
	}
	if committed || term != w.term || leader != w.leader {
		w.term, w.leader, w.since, w.waiting = term, leader, now, 0
		return 0, false
	}
	waiting = now.Sub(w.since)
	w.waiting = waiting
	if waiting < timeout {
		return waiting, false
	}
	w.stalled, w.stalledTerm = leader, term
	w.since = now // one stall per timeout, should the term not move
	return waiting, true
}

// status returns how long the member's reports had gone uncommitted at its
// last report, and the last leader it gave up.
func (w *stallWatch) status() (waiting time.Duration, stalled string, stalledTerm uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting, w.stalled, w.stalledTerm
}

// watchStall updates the stall watch after one report while this member
// follows leaderID (a Raft server ID) at term, and gives that leader up when it
// stalled. A report counts as committed when this member's own replica holds a
// later report of its own than at the last look.
func (s *Member) watchStall(term uint64, leaderID string) {
	if leaderID == s.serverID {
		leaderID = ""
	}
	seq := s.store.LastSeq(s.cfg.Node)
	committed := seq != s.stall.seq.Swap(seq)
	waiting, stall := s.stall.reported(s.clock.Now(), term, leaderID, committed, s.stallTimeout())
	s.metrics.reportsUncommitted.Set(waiting.Seconds())
	if !stall {
		return
	}
	s.follow.Stall(term, leaderID)
	s.metrics.leaderStalls.Inc()
	node := leaderID
	if m, ok := s.memberByID(leaderID); ok {
		node = m.Node
	}
	s.log.Warn("the leader committed none of this member's reports for the stall timeout; no longer following it in this term, so the zone can elect another",
		"leader", node, "term", term, "waited", waiting.Round(time.Second))
}
