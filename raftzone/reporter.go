package raftzone

import (
	"context"
	"errors"
	"net/http"

	"github.com/edgequorum/edgequorum/zone"
)

// reportLoop sends this member's report every ReportPeriod, and at once when an
// observation flips so a dead peer is judged without waiting a whole period.
func (s *Member) reportLoop(ctx context.Context) {
	t := s.clock.NewTicker(s.cfg.ReportPeriod)
	defer t.Stop()
	changes := s.deps.Observations.Changes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-changes:
		}
		s.reportOnce(ctx)
	}
}

// buildReport signs a report holding the results that differ from what the
// zone has committed for us — a lost or rejected report is therefore repaired by
// the next one without any acknowledgement bookkeeping.
func (s *Member) buildReport() (zone.Report, error) {
	row, err := s.state().MatrixRow(s.cfg.Node)
	if err != nil {
		return zone.Report{}, err
	}
	var delta []zone.Result
	for _, r := range s.deps.Observations.Results() {
		if r.Peer == s.cfg.Node {
			continue
		}
		if c, ok := row[r.Peer]; ok && c.OK == r.OK && c.Score == r.Score {
			continue
		}
		delta = append(delta, r)
	}
	zone.SortResults(delta)
	seq, err := s.seq.Next()
	if err != nil {
		return zone.Report{}, err
	}
	rep := zone.Report{Zone: s.cfg.Zone, From: s.cfg.Node, Seq: seq, SentAt: s.clock.Now().UTC(),
		Results: delta, APIReachable: s.reachesAPI()}
	a := s.announcement()
	rep.Release, rep.Level = a.Release, a.Level
	id, key := s.cfg.Keys.SigningKey()
	if err := rep.Sign(id, key); err != nil {
		return zone.Report{}, err
	}
	if err := rep.SignNode(s.port.NodeKey()); err != nil {
		return zone.Report{}, err
	}
	return rep, nil
}

func (s *Member) reportOnce(ctx context.Context) {
	if _, err := s.state().Member(s.cfg.Node); err != nil {
		// Not admitted yet; the leader would refuse us.
		s.metrics.reportsSent.WithLabelValues("not_joined").Inc()
		return
	}
	_, leaderAddr, ok := s.Leader()
	if !ok {
		s.metrics.reportsSent.WithLabelValues("no_leader").Inc()
		return
	}
	rep, err := s.buildReport()
	if err != nil {
		s.log.Error("build report", "err", err)
		s.metrics.reportsSent.WithLabelValues("error").Inc()
		return
	}
	// The leader may hold a heartbeat for HeartbeatBatchWindow before it
	// commits it; the wait must cover that and the commit.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReportPeriod+s.cfg.heartbeatBatchWindow())
	defer cancel()
	if s.Term() != 0 {
		err = s.intake.submit(ctx, rep)
	} else {
		err = s.callPeer(ctx, leaderAddr, "/v1/reports", rep, nil)
		var pe *PeerError
		if errors.As(err, &pe) && pe.Status == http.StatusMisdirectedRequest && pe.Leader != "" && pe.Leader != leaderAddr {
			err = s.callPeer(ctx, pe.Leader, "/v1/reports", rep, nil)
		}
	}
	if s.inConfiguration() {
		_, leaderID := s.raft.LeaderWithID()
		s.watchStall(s.raft.CurrentTerm(), string(leaderID))
	}
	var pe *PeerError
	var rj *RejectError
	switch {
	case err == nil:
		s.metrics.reportsSent.WithLabelValues("ok").Inc()
		s.cleanStart.Do(s.dropMigrationBackups)
	case errors.As(err, &pe), errors.As(err, &rj):
		s.metrics.reportsSent.WithLabelValues("rejected").Inc()
		s.log.Debug("leader rejected our report", "err", err)
	default:
		s.metrics.reportsSent.WithLabelValues("unreachable").Inc()
		s.log.Debug("report not delivered", "leader", leaderAddr, "err", err)
	}
}
