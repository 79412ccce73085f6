package raftzone

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
)

// TestFormationDoesNotWaitForTicks starts a zone whose reconcile tick never
// comes: members joining must still become voters, up to --voters, because a
// join starts a round at once. Before, a new zone kept one voter until the
// tick, and losing its founder then left it leaderless for good.
func TestFormationDoesNotWaitForTicks(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) { c.ReconcilePeriod = time.Hour }
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	st := l.srv.Status()
	if st.Forming || st.Voters != 5 || st.WantVoters != 5 {
		t.Errorf("status says forming=%v with %d of %d voters, want a formed zone of 5", st.Forming, st.Voters, st.WantVoters)
	}
	// The founder can now die without taking the zone with it.
	z.stop(l.name)
	if nl := z.waitLeader(60 * time.Second); nl == l {
		t.Fatal("no new leader")
	}
}

// TestDeadNonvoterNotPromoted kills a nonvoter whose last report is still fresh
// together with a voter: the replacement for the voter must pass the live
// check, so the dead nonvoter, which looks healthy on paper, is never chosen.
// Promoting it would leave a zone of three voters with two dead, which can
// neither commit nor elect a leader until one returns.
func TestDeadNonvoterNotPromoted(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) {
		c.Voters = 3
		c.ReconcilePeriod = 200 * time.Millisecond
		c.DeadVoterTimeout = time.Second
		c.VoteTimeout = time.Minute // the dead nonvoter's last report stays fresh
	}
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	cfg, _ := l.srv.configuration()
	var deadVoter, deadSpare *testNode
	for _, n := range z.running() {
		switch {
		case n == l:
		case cfg[n.srv.ServerID()].Suffrage == raft.Voter && deadVoter == nil:
			deadVoter = n
		case cfg[n.srv.ServerID()].Suffrage == raft.Nonvoter && deadSpare == nil:
			deadSpare = n
		}
	}
	spareID, voterID := deadSpare.srv.ServerID(), deadVoter.srv.ServerID()
	z.stop(deadVoter.name)
	z.stop(deadSpare.name)
	poll.Until(t, 60*time.Second, "dead voter replaced by the live nonvoter", func() (bool, string) {
		cfg, err := l.srv.configuration()
		if err != nil {
			return false, err.Error()
		}
		if cfg[spareID].Suffrage == raft.Voter {
			t.Fatalf("the dead %s was promoted", deadSpare.name)
		}
		var voters []string
		for _, n := range z.running() {
			if cfg[n.srv.ServerID()].Suffrage == raft.Voter {
				voters = append(voters, n.name)
			}
		}
		return len(voters) == 3 && cfg[voterID].Suffrage != raft.Voter, fmt.Sprintf("live voters %v", voters)
	})
	// The zone still commits: both dead members are judged.
	z.waitVerdicts(60*time.Second, map[string]zone.State{deadVoter.name: zone.Unhealthy, deadSpare.name: zone.Unhealthy})
	if got := testutil.ToFloat64(l.srv.metrics.membershipChanges.WithLabelValues("promote")); got < 3 {
		t.Errorf("promote counted %v times, want at least 3 (two at formation, one replacement)", got)
	}
}
