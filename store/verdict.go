package store

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/zone"
)

// The verdict rule, which the leader applies to decide and every replica applies
// again to check.
//
// A leader commits a verdict together with the applied index of the state it
// tallied from (VerdictBatch.Basis) and the vote timeout it used. A replica
// applying the batch holds that same state when no report or member change was
// applied after the basis; it then tallies each verdict again at the verdict's
// decision time and applies it only when state and counts agree. So a leader
// — honest, buggy or stolen — commits only what the signed reports of a
// majority say. What a replica cannot check, it refuses (skips and counts):
// a batch tallied from older evidence (a race with a report batch; the leader
// tallies again at once), a vote timeout longer than this replica's own, a
// decision stamped before the evidence it counts, a term other than the
// entry's, "unknown" (which never replaces a verdict), and the legacy
// TypeVerdictBatch, which names no basis.

// Reasons a replica refuses a verdict, keys of ApplyResult.Refused.
const (
	// RefuseVerdictStale: evidence was applied after the batch's basis, so
	// the state it was tallied from is gone. An honest leader tallies again.
	RefuseVerdictStale = "verdict_stale"
	// RefuseVerdictUnsupported: the committed evidence, tallied again, does
	// not give this verdict.
	RefuseVerdictUnsupported = "verdict_unsupported"
	// RefuseVerdictTerm: the verdict names a term other than its log
	// entry's.
	RefuseVerdictTerm = "verdict_term"
	// RefuseVerdictUnchecked: a legacy batch that cannot be tallied again.
	RefuseVerdictUnchecked = "verdict_unchecked"
)

// Tally computes every member's verdict from the replicated evidence, exactly as
// DESIGN.md states the rule: for node X in a zone of M members count only the
// opinions of the other M−1 members whose last report is fresher than
// voteTimeout; healthy if pros ≥ q, unhealthy if cons ≥ q, q = ⌊(M−1)/2⌋+1,
// otherwise unknown. A zone of one member has no verdicts.
//
// It is a pure function of its inputs so the rule can be tested exhaustively and
// every leader and replica computes the same answer from the same committed
// state.
func Tally(members []zone.Member, last map[string]LastReport, matrix Matrix, now time.Time, voteTimeout time.Duration) map[string]zone.Verdict {
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

// TallyInput is the committed evidence and verdicts at one applied index, read
// in one transaction: what a leader tallies from. Its Matrix rows are shared
// with later tallies (tallyRows) and must not be modified.
type TallyInput struct {
	Members  []zone.Member
	Last     map[string]LastReport
	Matrix   Matrix
	Verdicts map[string]zone.Verdict
	// Applied is the applied index the input was read at; a VerdictBatch
	// tallied from it names it as its Basis.
	Applied uint64
}

// TallyInput reads the evidence a verdict round tallies from.
func (s *Store) TallyInput() (TallyInput, error) {
	var in TallyInput
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		if in.Members, err = readMembers(tx); err != nil {
			return err
		}
		if in.Last, err = readLastReports(tx); err != nil {
			return err
		}
		if in.Matrix, err = s.tally.read(tx); err != nil {
			return err
		}
		if in.Verdicts, err = readVerdicts(tx); err != nil {
			return err
		}
		in.Applied, _ = appliedPos(tx)
		return nil
	})
	return in, err
}

// keyEvidence holds the index of the last log that changed the evidence a tally
// reads (an applied report, a changed member list) and the time of the last
// report batch: uint64 index | int64 Unix nanoseconds.
var keyEvidence = []byte("evidence")

func evidencePos(tx *bbolt.Tx) (index uint64, at time.Time) {
	v := tx.Bucket(bucketMeta).Get(keyEvidence)
	if len(v) != 16 {
		return 0, time.Time{}
	}
	return binary.BigEndian.Uint64(v[:8]), unixNano(v[8:16])
}

func putEvidence(tx *bbolt.Tx, index uint64, at time.Time) error {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 16), index)
	v = binary.BigEndian.AppendUint64(v, uint64(at.UnixNano()))
	return tx.Bucket(bucketMeta).Put(keyEvidence, v)
}

// applyVerdicts stores the verdicts of b that the evidence in tx supports; term
// is the term of b's log entry.
func applyVerdicts(tx *bbolt.Tx, b VerdictBatch, term uint64, maxVoteTimeout time.Duration, voters func() (map[string]bool, bool), rows *tallyRows) (*ApplyResult, error) {
	res := &ApplyResult{}
	refuseAll := func(reason string) (*ApplyResult, error) {
		for range b.Verdicts {
			res.refuse(reason)
		}
		return res, nil
	}
	if b.unchecked {
		return refuseAll(RefuseVerdictUnchecked)
	}
	evIndex, evAt := evidencePos(tx)
	if b.Basis < evIndex {
		return refuseAll(RefuseVerdictStale)
	}
	if b.VoteTimeout <= 0 || (maxVoteTimeout > 0 && b.VoteTimeout > maxVoteTimeout) {
		return refuseAll(RefuseVerdictUnsupported)
	}
	members, err := readMembers(tx)
	if err != nil {
		return nil, err
	}
	last, err := readLastReports(tx)
	if err != nil {
		return nil, err
	}
	matrix, err := rows.read(tx)
	if err != nil {
		return nil, err
	}
	verdicts := tx.Bucket(bucketVerdicts)
	if b.Recovery {
		return applyRecoveryVerdicts(tx, b, term, members, last, evAt, voters, res)
	}
	// Tallies by decision time: a batch's verdicts share one.
	tallies := map[time.Time]map[string]zone.Verdict{}
	for _, v := range b.Verdicts {
		if v.Term != term {
			res.refuse(RefuseVerdictTerm)
			continue
		}
		t, ok := tallies[v.DecidedAt]
		if !ok {
			t = Tally(members, last, matrix, v.DecidedAt, b.VoteTimeout)
			tallies[v.DecidedAt] = t
		}
		want, member := t[v.Node]
		switch {
		case !member:
			res.Skipped++
			continue
		case v.DecidedAt.Before(evAt):
			// Decided before the last evidence it counts was stamped:
			// a new leader whose clock is behind its predecessor's
			// tallies again after its own first report batch.
			res.refuse(RefuseVerdictStale)
			continue
		case v.State == zone.Unknown, want.State != v.State, want.Pros != v.Pros, want.Cons != v.Cons, want.Members != v.Members:
			res.refuse(RefuseVerdictUnsupported)
			continue
		}
		if err := putVerdict(verdicts, v); err != nil {
			return nil, err
		}
		res.Applied++
	}
	return res, nil
}

// applyRecoveryVerdicts stores the "unhealthy" of a recovery for each member
// that is no voter of this replica's latest Raft configuration and that
// has sent no report for the batch's vote timeout: the survivors of a lost
// quorum re-form the voters without the dead (the recovered leader may still
// seat a dead member as a stand-by until it leaves), and a member that has no
// vote and is silent is what a dead one looks like. Anything else is refused.
func applyRecoveryVerdicts(tx *bbolt.Tx, b VerdictBatch, term uint64, members []zone.Member, last map[string]LastReport, evAt time.Time,
	voters func() (map[string]bool, bool), res *ApplyResult) (*ApplyResult, error) {
	var servers map[string]bool
	known := false
	if voters != nil {
		servers, known = voters()
	}
	byNode := make(map[string]zone.Member, len(members))
	for _, m := range members {
		byNode[m.Node] = m
	}
	verdicts := tx.Bucket(bucketVerdicts)
	for _, v := range b.Verdicts {
		m, member := byNode[v.Node]
		voter := servers[m.ServerID]
		lr, reported := last[v.Node]
		switch {
		case !member:
			res.Skipped++
			continue
		case v.Term != term:
			res.refuse(RefuseVerdictTerm)
			continue
		case v.DecidedAt.Before(evAt):
			res.refuse(RefuseVerdictStale)
			continue
		case v.State != zone.Unhealthy || !known || voter || (reported && v.DecidedAt.Sub(lr.ReceivedAt) <= b.VoteTimeout):
			res.refuse(RefuseVerdictUnsupported)
			continue
		}
		if err := putVerdict(verdicts, v); err != nil {
			return nil, err
		}
		res.Applied++
	}
	return res, nil
}

// putVerdict stores v as its node's verdict.
func putVerdict(verdicts *bbolt.Bucket, v zone.Verdict) error {
	val, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return verdicts.Put([]byte(v.Node), val)
}
