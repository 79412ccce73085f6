package raftzone

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// requireVotes checks that votes are for leader l's current term and name
// l, each signed with its signer's node key, and come from at least want
// members.
func requireVotes(t *testing.T, z *testZone, l *testNode, term uint64, votes []zone.LeaderVote, want int) map[string]bool {
	t.Helper()
	signers := map[string]bool{}
	for _, v := range votes {
		key, err := zoneport.LoadOrCreateNodeKey(z.nodes[v.Signer].dir)
		if err != nil {
			t.Fatal(err)
		}
		if v.Zone != testZoneName || v.Term != term || v.Leader != l.name || !v.Verify(key.Public().(ed25519.PublicKey)) {
			t.Errorf("vote of %s: %+v, verifies %v; want one for %s in term %d, signed with its node key",
				v.Signer, v, v.Verify(key.Public().(ed25519.PublicKey)), l.name, term)
		}
		signers[v.Signer] = true
	}
	if len(signers) < want {
		t.Errorf("votes from %d members (%v), want %d", len(signers), signers, want)
	}
	return signers
}

// TestLeaderVotes: the leader gathers every running member's signed vote
// that it leads in its term; a member refuses to vote for anyone its own Raft
// state does not name as leader, or for another term; and after a handover
// the new leader's votes are for its own term.
func TestLeaderVotes(t *testing.T) {
	z := newTestZone(t, 4)
	z.startAll()
	l := z.waitConverged(60*time.Second, 4)
	ctx := context.Background()
	term, votes := l.srv.Leadership(ctx)
	if term == 0 {
		t.Fatal("the leader leads no term")
	}
	signers := requireVotes(t, z, l, term, votes, 4)
	if !signers[l.name] {
		t.Errorf("no vote of the leader's own")
	}
	for _, n := range z.running() {
		if n == l {
			continue
		}
		if term, votes := n.srv.Leadership(ctx); term != 0 || votes != nil {
			t.Errorf("follower %s gathered votes for term %d: %v", n.name, term, votes)
		}
		if _, err := n.srv.voteLeader(term, n.name); err == nil {
			t.Errorf("%s votes for itself while %s leads", n.name, l.name)
		}
		if _, err := n.srv.voteLeader(term+1, l.name); err == nil {
			t.Errorf("%s votes for %s in term %d, a term it has not seen", n.name, l.name, term+1)
		}
	}

	z.stop(l.name)
	next := z.waitLeader(60 * time.Second)
	poll.Until(t, 30*time.Second, "a majority's votes for "+next.name, func() (bool, string) {
		nt, nv := next.srv.Leadership(ctx)
		return nt > term && len(nv) >= 3, fmt.Sprintf("term %d, %d votes", nt, len(nv))
	})
	nt, nv := next.srv.Leadership(ctx)
	requireVotes(t, z, next, nt, nv, 3)
}
