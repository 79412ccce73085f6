package raftzone

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// Tally computes every member's verdict from the replicated evidence, exactly as
// DESIGN.md states the rule: for node X in a zone of M members count only the
// opinions of the other M−1 members whose last report is fresher than
// voteTimeout; healthy if pros ≥ q, unhealthy if cons ≥ q, q = ⌊(M−1)/2⌋+1,
// otherwise unknown. A zone of one member has no verdicts.
//
// It is a pure function of its inputs so the rule can be tested exhaustively and
// every leader computes the same answer from the same committed state.
func Tally(members []zone.Member, last map[string]store.LastReport, matrix store.Matrix, now time.Time, voteTimeout time.Duration) map[string]zone.Verdict {
	m := len(members)
	if m <= 1 {
		return nil
	}
	q := zone.Quorum(m)
	// One pass over each fresh checker's row, counting into slices: the
	// leader runs this every vote period over N² cells, and a lookup per
	// (checker, checked) pair cost twice the map work for the same counts.
	index := make(map[string]int, m)
	for i, mem := range members {
		index[mem.Node] = i
	}
	pros, cons := make([]int, m), make([]int, m)
	for _, c := range members {
		// A report stamped far in the future (a new leader whose clock is
		// behind) is not fresh forever: only |age| ≤ voteTimeout counts.
		lr, ok := last[c.Node]
		if age := now.Sub(lr.ReceivedAt); !ok || age > voteTimeout || age < -voteTimeout {
			continue
		}
		for peer, cell := range matrix[c.Node] {
			i, ok := index[peer]
			if !ok || peer == c.Node {
				continue
			}
			if cell.OK {
				pros[i]++
			} else {
				cons[i]++
			}
		}
	}
	out := make(map[string]zone.Verdict, m)
	for _, x := range members {
		i := index[x.Node]
		v := zone.Verdict{Node: x.Node, State: zone.Unknown, Members: m, Pros: pros[i], Cons: cons[i]}
		switch {
		case v.Pros >= q:
			v.State = zone.Healthy
		case v.Cons >= q:
			v.State = zone.Unhealthy
		}
		out[x.Node] = v
	}
	return out
}

// verdictChanges picks the tallies that change a committed verdict. Unknown
// never replaces a verdict: without a quorum the zone keeps its last judgement.
func verdictChanges(tally, committed map[string]zone.Verdict) []zone.Verdict {
	var out []zone.Verdict
	for node, v := range tally {
		if v.State == zone.Unknown {
			continue
		}
		if prev, ok := committed[node]; ok && prev.State == v.State {
			continue
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b zone.Verdict) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// voteLoop recomputes verdicts every VotePeriod while this member leads, commits
// the changes through Raft and only then hands them to the sink, so a verdict
// written to the API is always one the zone has agreed on.
func (s *Server) voteLoop(ctx context.Context, term uint64) {
	t := s.clock.NewTicker(s.cfg.VotePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := s.vote(ctx, term); err != nil && ctx.Err() == nil {
			s.log.Warn("verdict round failed", "term", term, "err", err)
		}
	}
}

func (s *Server) vote(ctx context.Context, term uint64) error {
	members, err := s.store.Members()
	if err != nil {
		return err
	}
	matrix, err := s.store.Matrix()
	if err != nil {
		return err
	}
	committed, err := s.store.Verdicts()
	if err != nil {
		return err
	}
	now := s.clock.Now().UTC()
	changes := verdictChanges(Tally(members, s.lastReports(), matrix, now, s.cfg.VoteTimeout), committed)
	if len(changes) == 0 {
		return nil
	}
	for i := range changes {
		changes[i].Term, changes[i].Leader, changes[i].DecidedAt = term, s.cfg.Node, now
	}
	cmd, err := store.EncodeVerdictBatch(store.VerdictBatch{Verdicts: changes})
	if err != nil {
		return err
	}
	if _, err := s.apply(ctx, "verdicts", cmd); err != nil {
		return err
	}
	for _, v := range changes {
		s.metrics.verdictChanges.WithLabelValues(string(v.State)).Inc()
		s.log.Info("verdict changed", "peer", v.Node, "state", v.State, "pros", v.Pros, "cons", v.Cons, "members", v.Members, "term", term)
	}
	if s.deps.Sink != nil {
		s.deps.Sink.Verdicts(term, changes, false)
	}
	return nil
}

func sortedVerdicts(m map[string]zone.Verdict) []zone.Verdict {
	out := make([]zone.Verdict, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b zone.Verdict) int { return strings.Compare(a.Node, b.Node) })
	return out
}
