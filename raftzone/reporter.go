package raftzone

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/edgequorum/edgequorum/store"
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

// fullReportPeriod is how often a report carries every result, not only
// those that differ from this member's committed row.
//
// Why: the row compared with is this member's replica's, and replicas can
// differ. A replica drops a result about a peer its own view of the cluster
// has not confirmed as a member yet (store.Witness), so the leader's replica
// may lack a result that this member's replica holds, and a report of
// differences alone would never send it again: the leader would never judge
// that peer. A cell a full report repeats unchanged keeps its time.
const fullReportPeriod = 30 * time.Second

// buildReport signs a report holding the results that differ from what the
// zone has committed for us — a lost or rejected report is therefore repaired by
// the next one without any acknowledgement bookkeeping — and, every
// fullReportPeriod, every result.
func (s *Member) buildReport() (zone.Report, error) {
	row, err := s.state().MatrixRow(s.cfg.Node)
	if err != nil {
		return zone.Report{}, err
	}
	delta := toReport(s.cfg.Node, row, s.deps.Observations.Results(), s.fullReportDue(s.clock.Now()))
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

// toReport is what a report of self carries of results: those that differ
// from row, what self's replica committed, or all of them when full; never
// one about self. Sorted.
func toReport(self string, row map[string]store.Cell, results []zone.Result, full bool) []zone.Result {
	var out []zone.Result
	for _, r := range results {
		if r.Peer == self {
			continue
		}
		if c, ok := row[r.Peer]; ok && c.OK == r.OK && c.Score == r.Score && !full {
			continue
		}
		out = append(out, r)
	}
	zone.SortResults(out)
	return out
}

// fullReportDue reports whether a report built at now carries every result,
// and if so counts it as sent.
func (s *Member) fullReportDue(now time.Time) bool {
	s.fullReportMu.Lock()
	defer s.fullReportMu.Unlock()
	if now.Sub(s.fullReportAt) < fullReportPeriod {
		return false
	}
	s.fullReportAt = now
	return true
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
	// A leader of an earlier release holds a heartbeat for
	// HeartbeatBatchWindow before it commits it and answers; the wait must
	// cover that and the commit.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReportPeriod+s.cfg.heartbeatBatchWindow())
	defer cancel()
	var answer reportAnswer
	if s.Term() != 0 {
		err = s.intake.submit(ctx, rep)
		if errors.Is(err, ErrQueued) {
			err, answer.Queued = nil, true
		}
	} else {
		err = s.callPeer(ctx, leaderAddr, "/v1/reports", rep, &answer)
		var pe *PeerError
		if errors.As(err, &pe) && pe.Status == http.StatusMisdirectedRequest && pe.Leader != "" && pe.Leader != leaderAddr {
			err = s.callPeer(ctx, pe.Leader, "/v1/reports", rep, &answer)
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
		if !answer.Queued {
			// Committed: the zone holds what this member reports.
			s.cleanStart.Do(s.dropMigrationBackups)
		}
	case errors.As(err, &pe), errors.As(err, &rj):
		s.metrics.reportsSent.WithLabelValues("rejected").Inc()
		s.log.Debug("leader rejected our report", "err", err)
	default:
		s.metrics.reportsSent.WithLabelValues("unreachable").Inc()
		s.log.Debug("report not delivered", "leader", leaderAddr, "err", err)
	}
}
