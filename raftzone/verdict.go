package raftzone

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

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

// voteLoop recomputes verdicts every VotePeriod while this member leads, and
// at once when a report batch that changed a result has committed; it commits
// the changes through Raft and only then hands them to the sink, so a verdict
// written to the API is always one the zone has agreed on. The ticker stays
// for what no report brings: a member whose reports stopped goes stale.
func (s *Member) voteLoop(ctx context.Context, term uint64) {
	t := gridtick.NewOn(s.clock, slots.ZoneGrid(s.cfg.Zone), s.cfg.ReportPeriod, s.cfg.VotePeriod, rand.Float64())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		case <-s.voteKick:
		}
		if err := s.vote(ctx, term); err != nil && ctx.Err() == nil {
			s.log.Warn("verdict round failed", "term", term, "err", err)
		}
	}
}

func (s *Member) vote(ctx context.Context, term uint64) error {
	// A report batch committed between the tally's read and the verdicts'
	// commit makes every replica refuse them as stale (store/verdict.go):
	// tally again at once, a few times.
	for range voteAttempts {
		stale, err := s.voteOnce(ctx, term)
		if err != nil || !stale {
			return err
		}
	}
	return nil
}

// voteAttempts bounds the tallies of one vote round that lose the race with a
// report batch.
const voteAttempts = 3

// voteOnce tallies the committed evidence, commits the changes with the index
// they were tallied at, and hands the sink the verdicts this member's own
// replica applied: the same check every replica makes.
func (s *Member) voteOnce(ctx context.Context, term uint64) (stale bool, err error) {
	in, err := s.store.TallyInput()
	if err != nil {
		return false, err
	}
	now := s.clock.Now().UTC()
	changes := verdictChanges(store.Tally(in.Members, in.Last, in.Matrix, now, s.cfg.VoteTimeout), in.Verdicts)
	if len(changes) == 0 {
		return false, nil
	}
	for i := range changes {
		changes[i].Term, changes[i].Leader, changes[i].DecidedAt = term, s.cfg.Node, now
	}
	cmd, err := s.encode(store.VerdictBatch{Verdicts: changes, Basis: in.Applied, VoteTimeout: s.cfg.VoteTimeout})
	if err != nil {
		return false, err
	}
	resp, err := s.apply(ctx, "verdicts", cmd)
	if err != nil {
		return false, err
	}
	if res, ok := resp.(*store.ApplyResult); ok && res.Applied < len(changes) {
		if res.Refused[store.RefuseVerdictStale] > 0 {
			return true, nil
		}
		// Our own replica refused what we tallied: a bug, or a replica
		// that settled its member list between read and apply. Hand out
		// only what it holds.
		s.log.Warn("this leader's own replica refused verdicts it tallied", "term", term, "refused", res.Refused)
		committed, err := s.store.Verdicts()
		if err != nil {
			return false, err
		}
		kept := changes[:0]
		for _, v := range changes {
			if c, ok := committed[v.Node]; ok && c == v {
				kept = append(kept, v)
			}
		}
		changes = kept
	}
	for _, v := range changes {
		s.metrics.verdictChanges.WithLabelValues(string(v.State)).Inc()
		s.log.Info("verdict changed", "peer", v.Node, "state", v.State, "pros", v.Pros, "cons", v.Cons, "members", v.Members, "term", term)
	}
	if s.deps.Sink != nil && len(changes) > 0 {
		s.deps.Sink.Verdicts(term, changes, false)
	}
	return false, nil
}

func sortedVerdicts(m map[string]zone.Verdict) []zone.Verdict {
	out := make([]zone.Verdict, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b zone.Verdict) int { return strings.Compare(a.Node, b.Node) })
	return out
}
