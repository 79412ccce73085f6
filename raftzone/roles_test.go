package raftzone

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
)

// rolesOf returns the running members by role, as the leader's configuration
// has them.
func rolesOf(z *testZone, l *testNode) (voters, standbys, spares []*testNode, err error) {
	cfg, err := l.srv.configuration()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, n := range z.running() {
		srv, ok := cfg[n.srv.ServerID()]
		switch {
		case !ok:
			spares = append(spares, n)
		case srv.Suffrage == raft.Voter:
			voters = append(voters, n)
		default:
			standbys = append(standbys, n)
		}
	}
	return voters, standbys, spares, nil
}

// waitRoles waits for a formed large zone: five voters, two stand-bys, every
// other running member a spare that knows the leader and every member from
// the view a server copied to it, and every running member judged healthy.
func waitRoles(t *testing.T, z *testZone) *testNode {
	t.Helper()
	var l *testNode
	poll.Until(t, 90*time.Second, "voters, stand-bys and spares in place", func() (bool, string) {
		var why string
		if l, why = z.leader(); l == nil {
			return false, why
		}
		voters, standbys, spares, err := rolesOf(z, l)
		if err != nil {
			return false, err.Error()
		}
		if len(voters) != 5 || len(standbys) != 2 {
			return false, fmt.Sprintf("%d voters, %d stand-bys", len(voters), len(standbys))
		}
		for _, n := range spares {
			st := n.srv.Status()
			if st.Role != "spare" || !st.Ready || st.Leader != l.name || len(st.Members) != len(z.nodes) {
				return false, fmt.Sprintf("%s: role %q ready %v leader %q, %d members", n.name, st.Role, st.Ready, st.Leader, len(st.Members))
			}
		}
		return true, ""
	})
	return l
}

// TestLargeZoneRoles runs a zone of 15: only five voters and two stand-bys are
// Raft servers, and the eight spares get no replication at all. A voter that
// dies is replaced by a stand-by while the zone keeps its quorum and its
// leader, and a spare takes the free stand-by seat; a spare that dies is
// judged unhealthy like any member; and a spare restarted while the
// apiserver is unreachable comes back from its own copy of the zone.
func TestLargeZoneRoles(t *testing.T) {
	z := newTestZone(t, 15)
	z.startAll()
	l := waitRoles(t, z)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	// Spares vote for the leader too, by the view they copy: a majority of
	// the zone is more than its seven Raft servers.
	poll.Until(t, 60*time.Second, "votes of a majority of the zone for "+l.name, func() (bool, string) {
		_, votes := l.srv.Leadership(context.Background())
		return len(votes) >= 8, fmt.Sprintf("%d votes", len(votes))
	})
	term, votes := l.srv.Leadership(context.Background())
	requireVotes(t, z, l, term, votes, 8)
	// The leader replicates nothing to a spare: while the zone commits a few
	// dozen entries, the log of no member that stayed a spare grows. (The
	// planner may swap a stand-by that looks stale for a spare at any time,
	// and a member that was a stand-by keeps the log it had then.)
	_, _, spares, _ := rolesOf(z, l)
	held := map[*testNode]uint64{}
	for _, n := range spares {
		held[n] = n.srv.raft.LastIndex()
	}
	from := l.srv.raft.LastIndex()
	poll.UntilTrue(t, 60*time.Second, "the zone commits 30 entries", func() bool {
		voters, standbys, _, _ := rolesOf(z, l)
		for _, n := range append(voters, standbys...) {
			delete(held, n)
		}
		return l.srv.raft.CommitIndex() >= from+30
	})
	if len(held) < len(spares)/2 {
		t.Errorf("only %d of %d spares stayed spares while the zone committed 30 entries", len(held), len(spares))
	}
	for n, idx := range held {
		if now := n.srv.raft.LastIndex(); now != idx {
			t.Errorf("spare %s's Raft log grew from %d to %d: the leader replicated to it", n.name, idx, now)
		}
	}

	// A voter dies: a stand-by takes its seat with no moment in which the
	// configuration's live voters are no majority, under the same leader.
	voters, standbys, _, _ := rolesOf(z, l)
	// Every member seen as a stand-by from here on: the planner may swap a
	// stand-by for a better spare at any time, and the replacement must be
	// one of them, never a spare promoted straight to voter.
	wasStandby := map[*testNode]bool{}
	for _, n := range standbys {
		wasStandby[n] = true
	}
	var victim *testNode
	for _, n := range voters {
		if n != l {
			victim = n
			break
		}
	}
	term, victimID := l.srv.Term(), victim.srv.ServerID()
	z.stop(victim.name)
	poll.Until(t, 60*time.Second, "a stand-by votes in the dead voter's place", func() (bool, string) {
		if l.srv.Term() != term {
			t.Fatalf("leadership changed (term %d → %d) while a voter was replaced", term, l.srv.Term())
		}
		cfg, err := l.srv.configuration()
		if err != nil {
			return false, err.Error()
		}
		total, live := 0, 0
		for id, srv := range cfg {
			if srv.Suffrage != raft.Voter {
				continue
			}
			total++
			if id != victimID {
				live++
			}
		}
		if 2*live <= total {
			t.Fatalf("only %d of %d voters alive: the zone lost its quorum", live, total)
		}
		nv, ns, _, _ := rolesOf(z, l)
		promoted := false
		for _, n := range ns {
			wasStandby[n] = true
		}
		for _, n := range nv {
			if !slices.Contains(voters, n) {
				if !wasStandby[n] {
					t.Fatalf("%s became a voter without having been a stand-by", n.name)
				}
				promoted = true
			}
		}
		_, inCfg := cfg[victimID]
		return len(nv) == 5 && len(ns) == 2 && promoted && !inCfg,
			fmt.Sprintf("%d live voters, %d stand-bys, stand-by promoted %v, dead voter in configuration %v", len(nv), len(ns), promoted, inCfg)
	})

	// A spare dies: judged like any member.
	_, _, spares, _ = rolesOf(z, l)
	dead := spares[0]
	z.stop(dead.name)
	z.waitVerdicts(60*time.Second, map[string]zone.State{dead.name: zone.Unhealthy, victim.name: zone.Unhealthy})

	// A spare restarts while the apiserver is unreachable: no member list,
	// no genesis object. It rejoins from its own copy of the zone.
	spare := spares[1]
	z.list.set(z.candidates(), false)
	z.genesis.unavailable.Store(true)
	before := l.srv.store.LastSeq(spare.name)
	z.stop(spare.name)
	z.start(spare.name)
	poll.Until(t, 60*time.Second, "the restarted spare reports again", func() (bool, string) {
		st := spare.srv.Status()
		seq := l.srv.store.LastSeq(spare.name)
		return st.Role == "spare" && st.Ready && st.Leader == l.name && seq > before,
			fmt.Sprintf("role %q ready %v leader %q, committed seq %d (before %d)", st.Role, st.Ready, st.Leader, seq, before)
	})
	if peers := spare.srv.Peers(); len(peers) != len(z.nodes)-1 {
		t.Errorf("the restarted spare knows %d peers without the member list, want %d", len(peers), len(z.nodes)-1)
	}
	z.waitVerdicts(60*time.Second, map[string]zone.State{spare.name: zone.Healthy, dead.name: zone.Unhealthy})
}
