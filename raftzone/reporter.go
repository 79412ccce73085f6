package raftzone

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// reportLoop sends this member's report every ReportPeriod, and at once when an
// observation flips so a dead peer is judged without waiting a whole period.
// The periodic reports keep a random slot of the zone's grid (gridtick), so
// that the leader takes the reports of a slot, and a member sends its report
// with the probes of one, in one wakeup.
func (s *Member) reportLoop(ctx context.Context) {
	t := gridtick.New(s.clock, slots.ZoneGrid(s.cfg.Zone), s.cfg.ReportPeriod, rand.Float64())
	defer t.Stop()
	changes := s.deps.Observations.Changes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		case <-changes:
		}
		s.reportOnce(ctx)
	}
}

// A member diffs its report against its own replica's row, and replicas can
// differ: a replica drops a result about a peer its own view of the cluster
// has not confirmed as a member yet (store.Witness). When the leader's replica
// dropped one that this member's kept, a report of differences alone would
// never send it again, and the leader would never judge that peer. So the
// leader's answer names the members its replica's row of the sender lacks
// (reportAnswer.Lacks), and the next report carries this member's results
// about them; a repeated result leaves its cell, and the time it last changed,
// as they are.
//
// A leader of an earlier release says nothing of its row; while the last
// answer came from one, every fullUncheckedPeriod a report carries every
// result, as releases before this one did. With a leader that checks, a full
// report every fullCheckedPeriod still bounds how long any divergence the
// gaps cannot show (a spare's view restored from before a change) can last,
// at a twentieth of the cost.
//
// Both are at least so many report periods: a zone that reports more slowly
// (a time-dilated bench, a long --report-period) keeps the same share of full
// reports among its reports, instead of sending one every few periods.
const (
	fullUncheckedPeriod = 30 * time.Second
	fullCheckedPeriod   = 10 * time.Minute
	// At the default 2 s report period, the two periods above.
	fullUncheckedReports = 15
	fullCheckedReports   = 300
)

// fullPeriods are the periods of full reports for a member that reports
// every reportPeriod.
func fullPeriods(reportPeriod time.Duration) (unchecked, checked time.Duration) {
	return max(fullUncheckedPeriod, fullUncheckedReports*reportPeriod), max(fullCheckedPeriod, fullCheckedReports*reportPeriod)
}

// reportRepair is what the leader's last answer said of this member's row in
// its replica, and when this member last sent every result.
type reportRepair struct {
	mu      sync.Mutex
	fullAt  time.Time
	checked bool
	lacks   map[string]bool
}

// plan says what a report built at now, by a member that reports every
// reportPeriod, carries beyond the differences from this member's row: every
// result (full, which counts it as sent), or the results about the peers the
// leader's replica lacks.
func (r *reportRepair) plan(now time.Time, reportPeriod time.Duration) (full bool, lacks map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	unchecked, checked := fullPeriods(reportPeriod)
	period := unchecked
	if r.checked {
		period = checked
	}
	if r.fullAt.IsZero() || now.Sub(r.fullAt) >= period {
		r.fullAt = now
		return true, nil
	}
	return false, r.lacks
}

// answered takes in what a leader answered to a delivered report. Only
// names that member says are members are kept: an answer is input from the
// network, and this member holds results about its peers only.
func (r *reportRepair) answered(a reportAnswer, member func(node string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked = a.Checked
	r.lacks = nil
	for _, p := range a.Lacks {
		if !member(p) {
			continue
		}
		if r.lacks == nil {
			r.lacks = make(map[string]bool)
		}
		r.lacks[p] = true
	}
}

// buildReport signs a report holding the results that differ from what the
// zone has committed for us — a lost or rejected report is therefore repaired by
// the next one without any acknowledgement bookkeeping — and those the
// leader's replica lacks (reportRepair).
func (s *Member) buildReport() (zone.Report, error) {
	row, err := s.state().MatrixRow(s.cfg.Node)
	if err != nil {
		return zone.Report{}, err
	}
	full, lacks := s.repair.plan(s.clock.Now(), s.cfg.ReportPeriod)
	if full {
		s.metrics.reportsFull.Inc()
	}
	delta := toReport(s.cfg.Node, row, s.deps.Observations.Results(), full, lacks)
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
// from row, what self's replica committed, those about the peers in lacks, or
// all of them when full; never one about self. Sorted.
func toReport(self string, row map[string]store.Cell, results []zone.Result, full bool, lacks map[string]bool) []zone.Result {
	var out []zone.Result
	for _, r := range results {
		if r.Peer == self {
			continue
		}
		if c, ok := row[r.Peer]; ok && c.OK == r.OK && c.Score == r.Score && !full && !lacks[r.Peer] {
			continue
		}
		out = append(out, r)
	}
	zone.SortResults(out)
	return out
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
		// The leader's own row is its replica's: the differences are
		// all it lacks.
		err = s.intake.submit(ctx, rep)
		answer.Checked = err == nil || errors.Is(err, ErrQueued)
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
		s.repair.answered(answer, func(p string) bool { _, ok := s.memberByNode(p); return ok })
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
