package raftzone

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
)

// TestVerdictOnCommit: the leader judges a change as soon as the reports
// that say it commit, not at its next vote tick (an hour away here), and a
// follower's change does not queue behind a heartbeat the leader holds for
// its batch (nine tenths of a report period).
func TestVerdictOnCommit(t *testing.T) {
	z := newTestZone(t, 3)
	z.tweak = func(c *Config) {
		c.ReportPeriod, c.HeartbeatBatchWindow = time.Second, 900*time.Millisecond
		c.VotePeriod, c.VoteTimeout = time.Hour, 5*time.Second
	}
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	victim := "node-3"
	if l.name == victim {
		victim = "node-2"
	}
	z.setDead(victim, true)
	z.waitVerdicts(60*time.Second, map[string]zone.State{victim: zone.Unhealthy})
	z.setDead(victim, false)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
}

// TestHeartbeatAnsweredWhenQueued: a report that changes nothing is answered
// once it is verified and queued, and commits with the next batch.
func TestHeartbeatAnsweredWhenQueued(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var f *testNode
	for _, n := range z.running() {
		if n != l {
			f = n
			break
		}
	}
	rep, err := f.srv.buildReport()
	if err != nil {
		t.Fatal(err)
	}
	rep.Results = nil
	id, key := f.srv.cfg.Keys.SigningKey()
	if err := rep.Sign(id, key); err != nil {
		t.Fatal(err)
	}
	if err := rep.SignNode(f.srv.port.NodeKey()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := l.srv.intake.submit(ctx, rep); !errors.Is(err, ErrQueued) {
		t.Fatalf("heartbeat submitted: %v, want ErrQueued", err)
	}
	poll.UntilTrue(t, 30*time.Second, "the heartbeat committed", func() bool {
		return l.srv.store.LastSeq(f.name) >= rep.Seq
	})
	// The same report again is a replay, committed or pending.
	var rj *RejectError
	if err := l.srv.intake.submit(ctx, rep); !errors.As(err, &rj) || rj.Reason != RejectReplay {
		t.Fatalf("heartbeat replayed: %v, want a replay rejection", err)
	}
}
