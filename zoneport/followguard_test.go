package zoneport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// followView is the raft state a FollowGuard reads, set by the test.
type followView struct {
	term     uint64
	leader   string
	contact  time.Time
	voteTerm uint64
	voteCand string
	now      time.Time
}

func newTestFollowGuard(v *followView) *FollowGuard {
	return &FollowGuard{
		localTerm: func() uint64 { return v.term },
		leader:    func() (string, time.Time) { return v.leader, v.contact },
		voted: func() (uint64, string, bool) {
			return v.voteTerm, v.voteCand, v.voteTerm != 0
		},
		silence: time.Second,
		now:     func() time.Time { return v.now },
		started: v.now.Add(-time.Hour),
	}
}

func wantFollow(t *testing.T, f *FollowGuard, id, addr string, term uint64, reason string) {
	t.Helper()
	r := f.Replication(id, addr, term)
	switch {
	case reason == "" && r != nil:
		t.Fatalf("%s at term %d refused: %v", id, term, r)
	case reason != "" && r == nil:
		t.Fatalf("%s at term %d passed, want %s", id, term, reason)
	case reason != "" && r.reason != reason:
		t.Fatalf("%s at term %d refused for %s (%v), want %s", id, term, r.reason, r.err, reason)
	}
}

// TestFollowOneLeaderPerTerm: the leader a member follows in a term is the only
// one it follows in that term, and a server claiming a new term without
// winning this member's vote waits until that leader has been silent for a
// heartbeat timeout — the hijack a stolen voter tried with term+1.
func TestFollowOneLeaderPerTerm(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &followView{term: 7, leader: "L", contact: now, now: now}
	f := newTestFollowGuard(v)
	wantFollow(t, f, "L", "l:1", 7, "")
	wantFollow(t, f, "L", "l:1", 7, "")
	wantFollow(t, f, "S", "s:1", 7, RejectSecondLeader)
	wantFollow(t, f, "S", "s:1", 8, RejectLeaderAlive)
	wantFollow(t, f, "S", "s:1", 6, "") // raft answers a stale term itself

	// The leader went silent: a new term's first claimant is followed, and
	// from then on only it.
	v.now = now.Add(1500 * time.Millisecond)
	wantFollow(t, f, "C", "c:1", 8, "")
	wantFollow(t, f, "S", "s:1", 8, RejectSecondLeader)
	wantFollow(t, f, "L", "l:1", 7, RejectStaleTerm) // the local term has not caught up yet
	if term, id := f.following(); term != 8 || id != "C" {
		t.Fatalf("following %s in term %d, want C in 8", id, term)
	}
}

// TestFollowTheCandidateItVotedFor: in a term this member voted in, only the
// candidate it voted for is followed while that vote is fresh — a majority
// voted for the winner, so a server that races the winner's first heartbeat
// cannot gather one — and after a heartbeat timeout another (the candidate
// lost) or a restart that forgot who won.
func TestFollowTheCandidateItVotedFor(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	// Raft marks a granted vote as contact and clears the leader.
	v := &followView{term: 9, contact: now, voteTerm: 9, voteCand: "c:1", now: now}
	f := newTestFollowGuard(v)
	wantFollow(t, f, "S", "s:1", 9, RejectNotOurCandidate)
	wantFollow(t, f, "C", "c:1", 9, "")
	wantFollow(t, f, "S", "s:1", 9, RejectSecondLeader)

	// The candidate it voted for lost: the winner is followed once the vote
	// is a heartbeat timeout old.
	f = newTestFollowGuard(v)
	wantFollow(t, f, "W", "w:1", 9, RejectNotOurCandidate)
	v.now = now.Add(time.Second)
	wantFollow(t, f, "W", "w:1", 9, "")

	// Restarted: raft remembers the vote but not the contact; the start
	// counts as one.
	v = &followView{term: 9, voteTerm: 9, voteCand: "c:1", now: now}
	f = newTestFollowGuard(v)
	f.started = now
	wantFollow(t, f, "S", "s:1", 9, RejectNotOurCandidate)
	wantFollow(t, f, "C", "c:1", 9, "")
}

func TestFollowTimeoutNowOnlyFromTheLeader(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newTestFollowGuard(&followView{term: 3, leader: "L", contact: now, now: now})
	if r := f.TimeoutNow("S"); r == nil || r.reason != RejectNotOurLeader {
		t.Fatalf("timeout now from a server this member does not follow: %v", r)
	}
	if r := f.TimeoutNow("L"); r != nil {
		t.Fatalf("timeout now from the leader: %v", r)
	}
}

func TestFollowStalledLeader(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &followView{term: 4, leader: "L", contact: now, now: now}
	f := newTestFollowGuard(v)
	wantFollow(t, f, "L", "l:1", 4, "")
	f.Stall(4, "L")
	wantFollow(t, f, "L", "l:1", 4, RejectStalledLeader)
	// The next term's leader, even the same server, is heard again.
	v.term, v.leader = 5, ""
	wantFollow(t, f, "L", "l:1", 5, "")
}

// TestForcedElectionBudget: transfer votes are counted per candidate, and
// beyond the budget in the window they are refused until old ones age out.
func TestForcedElectionBudget(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var notes []bool
	fe := &ForcedElectionLog{now: func() time.Time { return now }, note: func(_ string, ok bool) { notes = append(notes, ok) }}
	for i := range forcedElectionBudget {
		if !fe.Add("s") {
			t.Fatalf("forced election %d refused within the budget", i+1)
		}
		now = now.Add(time.Second)
	}
	if fe.Add("s") {
		t.Fatal("a forced election over the budget was allowed")
	}
	if !fe.Add("other") {
		t.Fatal("one candidate's budget held another")
	}
	now = now.Add(forcedElectionWindow)
	if !fe.Add("s") {
		t.Fatal("the budget did not come back after the window")
	}
	got := fe.List()
	if len(got) != 2 || got[1].Node != "s" || got[1].Count != forcedElectionBudget+2 || got[1].Refused != 1 {
		t.Fatalf("list = %+v", got)
	}
	if len(notes) != forcedElectionBudget+3 || notes[forcedElectionBudget] {
		t.Fatalf("notes = %v", notes)
	}
}

// TestGuardHoldsTermsNearTheLiveLeader: while this member follows a live
// leader, an election can only be for the next term; transfer votes are
// counted and held to the budget; replication goes through FollowGuard.
func TestGuardHoldsTermsNearTheLiveLeader(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := &followView{term: guardTestLocalTerm, leader: "member-2", contact: now, now: now}
	g := guardTestGuard(nil).withDefaults()
	g.Follow = newTestFollowGuard(v)
	g.Forced = (&ForcedElectionLog{now: func() time.Time { return now }}).Add
	body := func(typ byte, req any) []byte { return guardTestEncode(t, typ, req)[1:] }

	vote := guardTestVote()
	vote.Term = guardTestLocalTerm + 2
	if _, err := g.check(RPCRequestVote, body(RPCRequestVote, vote)); err == nil {
		t.Fatal("a vote two terms ahead passed while the leader is alive")
	}
	vote.Term = guardTestLocalTerm + 1
	vote.LeadershipTransfer = true
	for range forcedElectionBudget {
		if _, err := g.check(RPCRequestVote, body(RPCRequestVote, vote)); err != nil {
			t.Fatalf("transfer vote within the budget: %v", err)
		}
	}
	_, err := g.check(RPCRequestVote, body(RPCRequestVote, vote))
	if r, ok := err.(*Refusal); !ok || r.reason != RejectForcedBudget {
		t.Fatalf("transfer vote over the budget: %v", err)
	}
	// Once the leader is silent, a member that missed elections catches up.
	v.now = now.Add(time.Minute)
	vote.Term, vote.LeadershipTransfer = guardTestLocalTerm+100, false
	if _, err := g.check(RPCRequestVote, body(RPCRequestVote, vote)); err != nil {
		t.Fatalf("a vote of a later term once the leader is silent: %v", err)
	}
	// Replication: a heartbeat of a term the member follows member-2 in
	// passes for member-2 only.
	v.now = now
	hb := &raft.AppendEntriesRequest{RPCHeader: guardTestHeader(), Term: guardTestLocalTerm + 1}
	_, err = g.check(RPCAppendEntries, body(RPCAppendEntries, hb))
	if r, ok := err.(*Refusal); !ok || r.reason != RejectLeaderAlive {
		t.Fatalf("heartbeat of the next term while the leader is alive: %v", err)
	}
}
