package raftzone

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
)

// placementTick is how often the leader looks at its own apiserver reach.
const placementTick = 250 * time.Millisecond

// transferTimeout bounds one leadership transfer: the target must win an
// election, which takes it one round trip when it is alive and up to a few
// election timeouts when it is not.
func (c *Config) transferTimeout() time.Duration { return 3*c.RaftElectionTimeout + time.Second }

// HandoverBound is the longest a leader that lost the apiserver takes to hand
// leadership to a voter that reaches it: --apiserver-fail-timeout without an
// answer, the next placement look, and the transfer. The agent sizes the zone
// Lease's duration from it, so the Lease never lapses during a handover.
func (c *Config) HandoverBound() time.Duration {
	return c.APIServerFailTimeout + placementTick + c.transferTimeout()
}

// placementLoop hands leadership to a voter that reaches the apiserver when this
// leader has had no answer from it for APIServerFailTimeout: verdicts are only
// useful to the cloud if the leader can write them. When no voter reaches the
// apiserver (the whole zone is cut off) leadership stays put and verdicts keep
// being committed.
func (s *Member) placementLoop(ctx context.Context, term uint64) {
	t := gridtick.NewOn(s.clock, slots.ZoneGrid(s.cfg.Zone), s.cfg.ReportPeriod, placementTick, rand.Float64())
	defer t.Stop()
	var downSince, lastTry time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		}
		now := s.clock.Now()
		reachable, lastContact := s.apiReach(now)
		if reachable {
			downSince = time.Time{}
			continue
		}
		if downSince.IsZero() {
			downSince = now
			if !lastContact.IsZero() && lastContact.Before(now) {
				downSince = lastContact
			}
		}
		if now.Sub(downSince) < s.cfg.APIServerFailTimeout || now.Sub(lastTry) < s.cfg.APIServerFailTimeout {
			continue
		}
		lastTry = now
		id, addr, node, ok := s.transferTarget(now)
		if !ok {
			s.log.Info("apiserver unreachable but no voter reaches it; keeping leadership", "term", term)
			s.metrics.transfers.WithLabelValues("no_target").Inc()
			continue
		}
		if wait, ok := s.handovers.try(now, s.cfg.APIServerFailTimeout); !ok {
			s.log.Info("apiserver unreachable, but this member handed leadership over moments ago and has it again; keeping it for now",
				"term", term, "nextTryIn", wait.Round(100*time.Millisecond))
			s.metrics.transfers.WithLabelValues("backoff").Inc()
			continue
		}
		s.log.Info("apiserver unreachable; handing leadership over", "term", term, "to", node, "down", now.Sub(downSince).Round(100*time.Millisecond))
		// Transfers can fail or hang (the target may die meanwhile); the
		// watchdog bounds the wait and we retry after another timeout.
		err := waitFuture(ctx, s.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)), s.cfg.transferTimeout())
		if err != nil {
			s.log.Warn("leadership transfer failed", "to", node, "err", err)
			s.metrics.transfers.WithLabelValues("failed").Inc()
			continue
		}
		s.metrics.transfers.WithLabelValues("ok").Inc()
	}
}

// handoverBackoffMax bounds the pause between one member's handovers on
// cloud loss, in units of APIServerFailTimeout (80 s at the defaults). A
// member whose last handover is older than twice that starts again from one
// fail timeout.
const handoverBackoffMax = 16

// handoverPacer spaces one member's handovers on cloud loss over all its
// terms. A handover that does not stick (its target loses the election, or
// finds the apiserver as slow and hands straight back) returns leadership
// within a second or two, to a new term whose placement loop would try again
// at once: when every voter sees the same overloaded apiserver, the zone then
// changes leader several times a second, writes nothing and spends each
// target's budget of forced elections (server.go), which a stolen box is
// meant to exhaust, not an honest zone. The pause doubles from one fail
// timeout with each handover that follows its predecessor within twice
// handoverBackoffMax fail timeouts. The first handover after a quiet spell
// is never delayed, so HandoverBound still holds for a single cut.
type handoverPacer struct {
	mu   sync.Mutex
	last time.Time
	wait time.Duration
}

// try reports whether a handover may start at now, and records it if so;
// otherwise it returns how long until the next may.
func (p *handoverPacer) try(now time.Time, failTimeout time.Duration) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	since := now.Sub(p.last)
	if !p.last.IsZero() && since < p.wait {
		return p.wait - since, false
	}
	if p.last.IsZero() || since >= 2*handoverBackoffMax*failTimeout {
		p.wait = failTimeout
	} else {
		p.wait = min(2*p.wait, handoverBackoffMax*failTimeout)
	}
	p.last = now
	return 0, true
}

// apiReach says whether this member reaches the apiserver now, and when it
// last heard from it if its APIHealth knows. A member whose last answer is
// older than APIServerFailTimeout counts as cut off even while a call hangs.
func (s *Member) apiReach(now time.Time) (bool, time.Time) {
	reachable := s.deps.APIHealth.Reachable()
	c, ok := s.deps.APIHealth.(APIContact)
	if !ok {
		return reachable, time.Time{}
	}
	last := c.LastContact()
	if !last.IsZero() && now.Sub(last) >= s.cfg.APIServerFailTimeout {
		reachable = false
	}
	return reachable, last
}

// transferTarget picks the voter with the freshest report saying it reaches the
// apiserver.
func (s *Member) transferTarget(now time.Time) (id, addr, node string, ok bool) {
	cfg, err := s.configuration()
	if err != nil {
		return "", "", "", false
	}
	members, err := s.store.Members()
	if err != nil {
		return "", "", "", false
	}
	last := s.lastReports()
	var best time.Time
	for _, m := range members {
		srv, inCfg := cfg[m.ServerID]
		if m.Node == s.cfg.Node || !inCfg || srv.Suffrage != raft.Voter {
			continue
		}
		lr, has := last[m.Node]
		if !has || !lr.APIReachable || now.Sub(lr.ReceivedAt) > s.cfg.VoteTimeout {
			continue
		}
		if lr.ReceivedAt.After(best) {
			best, id, addr, node, ok = lr.ReceivedAt, m.ServerID, m.RaftAddress, m.Node, true
		}
	}
	return id, addr, node, ok
}

// reachesAPI is apiReach's verdict for now: what this member's reports, its
// status and the voter planner say about its own reach.
func (s *Member) reachesAPI() bool {
	ok, _ := s.apiReach(s.clock.Now())
	return ok
}

// handOverOnStop gives leadership to another voter before a leader stops, while
// its transport still serves, so that a rolling upgrade or a drain costs the zone
// one transfer instead of an election timeout without a leader per node.
func (s *Member) handOverOnStop() {
	if s.raft.State() != raft.Leader {
		return
	}
	// Prefer a voter that reaches the apiserver; else raft picks the most
	// caught-up voter.
	target, to := (*raft.ServerID)(nil), "most caught-up voter"
	var addr raft.ServerAddress
	if id, a, node, ok := s.transferTarget(s.clock.Now()); ok {
		sid := raft.ServerID(id)
		target, addr, to = &sid, raft.ServerAddress(a), node
	}
	s.log.Info("stopping as leader; handing leadership over", "to", to, "term", s.raft.CurrentTerm())
	timeout := 2*s.cfg.RaftElectionTimeout + time.Second
	deadline := time.Now().Add(timeout)
	var err error
	for s.raft.State() == raft.Leader && time.Now().Before(deadline) {
		f := s.raft.LeadershipTransfer()
		if target != nil {
			f = s.raft.LeadershipTransferToServer(*target, addr)
		}
		if err = waitFuture(context.Background(), f, time.Until(deadline)); err == nil {
			break
		}
		// raft takes a transfer only while its leader loop waits for one, and
		// one at a time (placement may have one running): ask again shortly.
		if !errors.Is(err, raft.ErrEnqueueTimeout) && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil && s.raft.State() == raft.Leader {
		s.log.Warn("leadership transfer on stop failed; the zone elects after its election timeout", "err", err)
		s.metrics.transfers.WithLabelValues("stop_failed").Inc()
		return
	}
	s.metrics.transfers.WithLabelValues("stop_ok").Inc()
}
