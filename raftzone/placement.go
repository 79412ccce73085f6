package raftzone

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// placementLoop hands leadership to a voter that reaches the apiserver when this
// leader has lost it for APIServerFailTimeout: verdicts are only useful to the
// cloud if the leader can write them. When no voter reaches the apiserver (the
// whole zone is cut off) leadership stays put and verdicts keep being committed.
func (s *Server) placementLoop(ctx context.Context, term uint64) {
	t := s.clock.NewTicker(time.Second)
	defer t.Stop()
	var downSince, lastTry time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := s.clock.Now()
		if s.deps.APIHealth.Reachable() {
			downSince = time.Time{}
			continue
		}
		if downSince.IsZero() {
			downSince = now
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
		s.log.Info("apiserver unreachable; handing leadership over", "term", term, "to", node, "down", now.Sub(downSince).Round(time.Second))
		// Transfers can fail or hang (the target may die meanwhile); the
		// watchdog bounds the wait and we retry after another timeout.
		err := waitFuture(ctx, s.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)), 3*s.cfg.RaftElectionTimeout+time.Second)
		if err != nil {
			s.log.Warn("leadership transfer failed", "to", node, "err", err)
			s.metrics.transfers.WithLabelValues("failed").Inc()
			continue
		}
		s.metrics.transfers.WithLabelValues("ok").Inc()
	}
}

// transferTarget picks the voter with the freshest report saying it reaches the
// apiserver.
func (s *Server) transferTarget(now time.Time) (id, addr, node string, ok bool) {
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
