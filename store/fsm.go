package store

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

var _ raft.BatchingFSM = (*Store)(nil)

// ApplyResult is what Apply returns for a command log (raft hands it to the
// leader as ApplyFuture.Response). A command that could not be decoded yields
// an error instead, wrapping ErrUnknownVersion, ErrUnknownType or
// ErrBadCommand; a storage failure yields one wrapping ErrFailed.
type ApplyResult struct {
	// Index is the raft index of the log.
	Index uint64
	// Applied counts reports, verdicts or members that changed the state.
	Applied int
	// Skipped counts items the rules dropped: reports from non-members or
	// with a seq not above the sender's last, verdicts for non-members.
	Skipped int
	// Refused counts what the replica's own checks dropped, by reason:
	// reports that cannot be the sender's own (RefuseSignature) or whose
	// seq jumps too far (RefuseSeqJump), member-list changes its view of
	// the cluster does not confirm (Hold*), verdicts the evidence does not
	// support (RefuseVerdict*). They are in Skipped too.
	Refused map[string]int
	// AlreadyApplied is set when the log's index was at or below the applied
	// index, as when raft replays its log after a restart; nothing was done.
	AlreadyApplied bool

	// evidence is set when the command changed what a tally reads;
	// evidenceAt is then the report batch's time, if it was one.
	evidence   bool
	evidenceAt time.Time
}

// Apply implements raft.FSM.
func (s *Store) Apply(l *raft.Log) any {
	return s.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: the whole batch commits in one bbolt
// transaction together with the new applied index, so a crash leaves either all
// of it or none, and the replay that follows a restart skips exactly what was
// committed.
func (s *Store) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	if len(logs) == 0 {
		return resp
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.Err(); err != nil {
		fillErr(resp, err)
		return resp
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		fillErr(resp, fmt.Errorf("%w: %w", ErrFailed, ErrClosed))
		return resp
	}
	if err := s.applyLogs(logs, resp); err != nil {
		err = fmt.Errorf("%w: apply logs %d..%d: %w", ErrFailed, logs[0].Index, logs[len(logs)-1].Index, err)
		s.failed.Store(&err)
		fillErr(resp, err)
	}
	return resp
}

func fillErr(resp []any, err error) {
	for i := range resp {
		resp[i] = err
	}
}

// applyLogs fills resp and commits only if something changed: a batch of
// replayed or rejected logs leaves the file exactly as it was.
func (s *Store) applyLogs(logs []*raft.Log, resp []any) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	index, term := appliedPos(tx)
	dirty := false
	var refused []map[string]int
	for i, l := range logs {
		if l.Index <= index {
			resp[i] = &ApplyResult{Index: l.Index, AlreadyApplied: true}
			continue
		}
		if l.Type != raft.LogCommand {
			// Configuration changes are raft's business, but their index
			// still counts as applied.
			index, term, dirty = l.Index, l.Term, true
			continue
		}
		cmd, err := DecodeCommandAt(l.Data, s.opts.Level)
		if err != nil {
			// Not applied, nor half of it: the entry is skipped whole on
			// this replica and counted; raft moves on past it, so the
			// zone never waits for a member that cannot read it.
			err = fmt.Errorf("store: log %d: %w", l.Index, err)
			s.unreadable.note(l.Index, err)
			resp[i] = err
			continue
		}
		res, err := s.applyCommand(tx, cmd, l.Term)
		if err != nil {
			return fmt.Errorf("log %d (%v): %w", l.Index, cmd.Type(), err)
		}
		if res.evidence {
			_, at := evidencePos(tx)
			if !res.evidenceAt.IsZero() {
				at = res.evidenceAt
			}
			if err := putEvidence(tx, l.Index, at); err != nil {
				return err
			}
		}
		res.Index = l.Index
		resp[i] = res
		if res.Refused != nil {
			refused = append(refused, res.Refused)
		}
		index, term, dirty = l.Index, l.Term, true
	}
	if !dirty {
		return nil
	}
	if err := putApplied(tx, index, term); err != nil {
		return err
	}
	// Counted before the commit makes the applied index visible: whoever
	// sees the batch applied sees its refusals counted. A commit that fails
	// fails the store, and the count is of what it refused all the same.
	for _, m := range refused {
		for reason, n := range m {
			if c := s.refusals.counter(reason); c != nil {
				c.Add(uint64(n))
			}
		}
	}
	return tx.Commit()
}

// RefusedReports counts the reports this replica refused in committed batches,
// by reason (RefuseSignature, RefuseSeqJump), since the store was opened. A
// non-zero count on a follower means someone — possibly the leader — put words
// in a member's mouth.
func (s *Store) RefusedReports(reason string) uint64 { return s.Refused(reason) }

// Refused counts what this replica refused or held back of committed commands
// since the store was opened, by reason: reports (RefuseSignature,
// RefuseSeqJump), member-list changes its view of the cluster does not confirm
// (Hold*), verdicts the evidence does not support (RefuseVerdict*). Unknown
// reasons count zero.
func (s *Store) Refused(reason string) uint64 {
	if c := s.refusals.counter(reason); c != nil {
		return c.Load()
	}
	return 0
}

// RefusalReasons are every reason Refused counts.
var RefusalReasons = []string{RefuseSignature, RefuseSeqJump, HoldUnregistered, HoldKeyOfAnother, HoldStillInZone,
	RefuseVerdictStale, RefuseVerdictUnsupported, RefuseVerdictTerm, RefuseVerdictUnchecked}

// refusals is a counter per reason; the set of reasons is fixed.
type refusals struct {
	once sync.Once
	by   map[string]*atomic.Uint64
}

func (r *refusals) counter(reason string) *atomic.Uint64 {
	r.once.Do(func() {
		r.by = make(map[string]*atomic.Uint64, len(RefusalReasons))
		for _, reason := range RefusalReasons {
			r.by[reason] = new(atomic.Uint64)
		}
	})
	return r.by[reason]
}

// applyCommand changes state within tx. Decoding already validated cmd, so an
// error here is the storage's, never the command's.
func (s *Store) applyCommand(tx *bbolt.Tx, cmd Command, term uint64) (*ApplyResult, error) {
	switch c := cmd.(type) {
	case ReportBatch:
		return applyReports(tx, c, s.opts.SigMemo)
	case VerdictBatch:
		return applyVerdicts(tx, c, term, s.opts.MaxVoteTimeout, s.opts.Voters, &s.tally)
	case MemberSet:
		return applyMembers(tx, c, s.opts.Witness)
	}
	return nil, fmt.Errorf("%w: %T", ErrUnknownType, cmd)
}

// memberKeys loads each member's pinned node key; a member without a usable
// one maps to nil, and none of its reports verify.
func memberKeys(tx *bbolt.Tx) (map[string]ed25519.PublicKey, error) {
	keys := make(map[string]ed25519.PublicKey)
	err := tx.Bucket(bucketMembers).ForEach(func(k, v []byte) error {
		m, err := decodeMember(v)
		if err != nil {
			return err
		}
		pub, _ := zone.ParseNodeKey(m.PublicKey)
		keys[string(k)] = pub
		return nil
	})
	return keys, err
}

// Reasons a replica refuses a report in a committed batch, the keys of
// ApplyResult.Refused.
const (
	RefuseSignature = "bad_signature"
	RefuseSeqJump   = "seq_jump"
)

// MaxSeqJump bounds how far a report's seq may lie ahead: above both the
// sender's last committed seq and its sent-at in Unix microseconds. Senders
// start their seqs at the clock in microseconds and add one per report, so an
// honest sender stays far below the bound, while a seq near 2^64 — which would
// make every later report a replay — is refused.
const MaxSeqJump = 1 << 32

// SeqInReach applies MaxSeqJump to r given the sender's last committed seq. The
// leader's intake applies the same rule, so an honest leader never commits a
// report a replica would refuse.
func SeqInReach(r *zone.Report, last uint64) bool {
	base := last
	if us := r.SentAt.UnixMicro(); us > 0 && uint64(us) > base {
		base = uint64(us)
	}
	return r.Seq <= base || r.Seq-base <= MaxSeqJump
}

func applyReports(tx *bbolt.Tx, b ReportBatch, sigs *zone.SigMemo) (*ApplyResult, error) {
	members, err := memberKeys(tx)
	if err != nil {
		return nil, err
	}
	reports, matrix, rel := tx.Bucket(bucketReports), tx.Bucket(bucketMatrix), tx.Bucket(bucketReleases)
	res := &ApplyResult{}
	var key []byte
	for i := range b.Reports {
		r := &b.Reports[i]
		from := []byte(r.From)
		pub, ok := members[r.From]
		if !ok {
			res.Skipped++
			continue
		}
		// Every replica checks the sender's own signature, so not even a
		// leader can commit words a member did not say: a report that fails
		// is skipped here the same way on every replica. The memo only
		// spares the leader checking again what its intake checked.
		if !r.VerifySigMemo(pub, sigs) {
			res.refuse(RefuseSignature)
			continue
		}
		// A sender without a report has last seq 0, so seqs start at 1.
		var last LastReport
		if prev := reports.Get(from); prev != nil {
			if last, err = decodeLastReport(prev); err != nil {
				return nil, err
			}
		}
		if r.Seq <= last.Seq {
			res.Skipped++
			continue
		}
		if !SeqInReach(r, last.Seq) {
			res.refuse(RefuseSeqJump)
			continue
		}
		err = reports.Put(from, encodeLastReport(LastReport{
			Seq: r.Seq, SentAt: r.SentAt, ReceivedAt: b.At, APIReachable: r.APIReachable, KeyID: r.KeyID,
		}))
		if err != nil {
			return nil, err
		}
		if err := putAnnouncement(rel, from, r); err != nil {
			return nil, err
		}
		res.Applied++
		res.evidence, res.evidenceAt = true, b.At
		if len(r.Results) == 0 {
			continue
		}
		row, err := matrix.CreateBucketIfNotExists(from)
		if err != nil {
			return nil, err
		}
		// bbolt copies keys but keeps references to values until commit, so
		// the key buffer is reused and each cell gets its own bytes, all from
		// one allocation per report.
		slab := make([]byte, 0, cellLen*len(r.Results))
		for _, rr := range r.Results {
			if _, ok := members[rr.Peer]; !ok || rr.Peer == r.From {
				continue
			}
			key = append(key[:0], rr.Peer...)
			// A result repeated unchanged (a member's periodic full
			// report) leaves the cell, and the time it last changed,
			// as they are.
			if old := row.Get(key); old != nil {
				if c, err := decodeCell(old); err == nil && c.OK == rr.OK && c.Score == rr.Score {
					continue
				}
			}
			start := len(slab)
			slab = encodeCell(slab, Cell{OK: rr.OK, Score: rr.Score, Latency: rr.Latency, At: b.At})
			if err := row.Put(key, slab[start:len(slab):len(slab)]); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// putAnnouncement keeps what a member last said of its release: a report
// without an announcement is of a release before levels existed, and clears
// what an earlier one said.
func putAnnouncement(rel *bbolt.Bucket, from []byte, r *zone.Report) error {
	if r.Level == skew.Unannounced {
		return rel.Delete(from)
	}
	a := skew.Announcement{Release: r.Release, Level: r.Level}
	if old := rel.Get(from); old != nil && bytes.Equal(old, encodeAnnouncement(a)) {
		return nil
	}
	return rel.Put(from, encodeAnnouncement(a))
}

func (r *ApplyResult) refuse(reason string) {
	r.Skipped++
	if r.Refused == nil {
		r.Refused = make(map[string]int)
	}
	r.Refused[reason]++
}

// applyMembers records m as the leader's claim of the member list and moves
// this replica's list toward it as far as its witness confirms (witness.go).
// What waits is counted in Refused and applied by Settle later.
func applyMembers(tx *bbolt.Tx, m MemberSet, w Witness) (*ApplyResult, error) {
	if err := putClaims(tx, m.Members); err != nil {
		return nil, err
	}
	changed, held, err := settleMembers(tx, w, nil)
	if err != nil {
		return nil, err
	}
	res := &ApplyResult{Applied: len(m.Members), Refused: held, evidence: changed}
	for _, n := range held {
		res.Skipped += n
	}
	return res, nil
}

// forget deletes every record keyed by node; dropColumns handles the cells
// others hold about it.
func forget(members, reports, matrix, verdicts, releases *bbolt.Bucket, node string) error {
	key := []byte(node)
	for _, b := range []*bbolt.Bucket{members, reports, verdicts, releases} {
		if err := b.Delete(key); err != nil {
			return err
		}
	}
	return deleteBucket(matrix, key)
}

func deleteBucket(parent *bbolt.Bucket, name []byte) error {
	err := parent.DeleteBucket(name)
	if errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// dropColumns removes the cells about nodes from every remaining row. Rows are
// collected first because bbolt forbids changing a bucket while iterating it.
func dropColumns(matrix *bbolt.Bucket, nodes []string) error {
	var rows [][]byte
	err := matrix.ForEachBucket(func(k []byte) error {
		rows = append(rows, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range rows {
		row := matrix.Bucket(name)
		for _, node := range nodes {
			if err := row.Delete([]byte(node)); err != nil {
				return err
			}
		}
	}
	return nil
}
