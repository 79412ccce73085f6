package raftzone

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/zone"
)

// TestDeadNonvoterNotPromoted kills a nonvoter whose last report is still fresh,
// before the leader's first promotion round, as happens when a node dies while a
// zone forms. Promoting it on the strength of that report would make a zone of
// two voters, one dead: it could neither commit nor elect a leader again. The
// test drives the leader's reconcile and vote rounds itself so the order of
// events is fixed.
func TestDeadNonvoterNotPromoted(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) {
		c.ReconcilePeriod = time.Hour // only the round at leadership start
		c.VotePeriod = time.Hour
		c.VoteTimeout = time.Minute // the victim's last report stays fresh
	}
	z.start("node-1")
	l := z.waitLeader(60 * time.Second)
	for _, name := range z.names()[1:] {
		z.start(name)
	}
	eventually(t, 60*time.Second, "four nonvoters that reported", func() (bool, string) {
		cfg, err := l.srv.configuration()
		if err != nil {
			return false, err.Error()
		}
		last := l.srv.lastReports()
		for _, n := range z.running() {
			if n == l {
				continue
			}
			if cfg[n.srv.ServerID()].Suffrage != raft.Nonvoter {
				return false, n.name + " is not a nonvoter"
			}
			if _, ok := last[n.name]; !ok {
				return false, n.name + " has not reported"
			}
		}
		return true, ""
	})
	// The old promoter took every spare with a fresh report, node-2 included.
	victimID := z.nodes["node-2"].srv.ServerID()
	z.stop("node-2")

	ctx := context.Background()
	if err := l.srv.reconcile(ctx, newPromoter()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	cfg, err := l.srv.configuration()
	if err != nil {
		t.Fatal(err)
	}
	if cfg[victimID].Suffrage == raft.Voter {
		t.Fatal("the dead node-2 was promoted")
	}
	var voters []string
	for _, n := range z.running() {
		if cfg[n.srv.ServerID()].Suffrage == raft.Voter {
			voters = append(voters, n.name)
		}
	}
	// Three live members pass the check; voters grow in pairs, so 1 + 2.
	if len(voters) != 3 || voters[0] != "node-1" {
		t.Errorf("voters after promotion %v, want node-1 and two of node-3..5", voters)
	}

	// The zone still commits: the dead member is judged.
	if err := l.srv.vote(ctx, l.srv.Term()); err != nil {
		t.Fatalf("vote round: %v", err)
	}
	v, err := l.srv.store.Verdict("node-2")
	if err != nil || v.State != zone.Unhealthy {
		t.Fatalf("node-2 verdict %+v (%v), want unhealthy", v, err)
	}
	if got := testutil.ToFloat64(l.srv.metrics.membershipChanges.WithLabelValues("promote_skipped")); got < 1 {
		t.Errorf("promote_skipped counted %v times, want at least 1", got)
	}
}
