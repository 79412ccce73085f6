package raftzone

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Rejection reasons, the label values of edgequorum_intake_reports_rejected_total.
const (
	RejectMalformed   = "malformed"
	RejectWrongZone   = "wrong_zone"
	RejectUnknownKey  = "unknown_key"
	RejectBadMAC      = "bad_mac"
	RejectBadSig      = "bad_signature"
	RejectNotSender   = "not_sender"
	RejectSeqJump     = "seq_jump"
	RejectNotMember   = "not_member"
	RejectClockSkew   = "clock_skew"
	RejectReplay      = "replay"
	RejectNotLeader   = "not_leader"
	RejectOverloaded  = "overloaded"
	RejectCommitError = "commit_failed"
)

// Sentinel errors for report rejections; a *RejectError wraps one of them.
var (
	ErrBadMAC    = errors.New("report MAC does not verify")
	ErrBadSig    = errors.New("report is not signed with the sender's pinned node key")
	ErrReplay    = errors.New("report sequence not greater than the last accepted")
	ErrNotMember = errors.New("report sender is not a zone member")
)

// RejectError is why the leader refused a report.
type RejectError struct {
	Reason string
	Status int
	Err    error
}

func (e *RejectError) Error() string { return fmt.Sprintf("report rejected (%s): %v", e.Reason, e.Err) }
func (e *RejectError) Unwrap() error { return e.Err }

func reject(reason string, status int, err error) *RejectError {
	return &RejectError{Reason: reason, Status: status, Err: err}
}

// maxPending bounds reports waiting for one batch; beyond it the leader sheds
// load rather than queueing without limit. maxPendingPerSender bounds one
// sender's share: an honest member has at most a report or two in flight, so a
// member flooding the leader fills its own share, not the batch.
const (
	maxPending          = 4096
	maxPendingPerSender = 4
)

// intake verifies reports on the leader and commits them in batches. A report
// that changes a result is committed within BatchWindow, so a failure is judged
// promptly; heartbeats wait up to HeartbeatBatchWindow and go along, so a zone
// of N members costs a couple of log entries per report period instead of N —
// each of which Raft sends to every follower.
//
// A heartbeat's sender is answered once the report is verified and queued
// (ErrQueued), not when it commits: a sender waits for one report at a time,
// and a change it sees while its heartbeat waited for the batch would wait
// too, up to HeartbeatBatchWindow. A heartbeat that does not commit costs
// nothing to repair: it changed nothing, and the next report carries every
// result that differs from what the zone holds.
type intake struct {
	s       *Member
	mu      sync.Mutex
	pending []pendingReport
	seqs    map[string]uint64 // highest pending seq per sender
	counts  map[string]int    // pending reports per sender
	urgent  bool              // a pending report changes a result
	// stopped is set when run returns: nothing would commit a report
	// queued after that, and its sender would wait out its deadline while
	// this member's peer API, shutting down, waits for it.
	stopped bool
	kick    chan struct{}
	hurry   chan struct{}
}

type pendingReport struct {
	r    zone.Report
	done chan *RejectError // nil when committed
}

func newIntake(s *Member) *intake {
	return &intake{s: s, seqs: map[string]uint64{}, counts: map[string]int{}, kick: make(chan struct{}, 1), hurry: make(chan struct{}, 1)}
}

// verify runs every check that does not need the batch: well-formed (the
// store's rules for a batch's reports included), right zone,
// known key, valid MAC, sender is a member, sent-at within the skew window, and
// seq beyond everything committed or pending from that sender.
func (in *intake) verify(r *zone.Report) *RejectError {
	s := in.s
	if r.From == "" || r.Seq == 0 || r.SentAt.IsZero() {
		return reject(RejectMalformed, http.StatusBadRequest, errors.New("report needs from, seq and sentAt"))
	}
	// The rules a report must meet to enter a batch: checked here, one
	// report at a time, so a bad one is refused alone instead of failing the
	// batch it would have joined and every report in it.
	if err := store.ValidateReport(r); err != nil {
		return reject(RejectMalformed, http.StatusBadRequest, err)
	}
	if r.Zone != s.cfg.Zone {
		return reject(RejectWrongZone, http.StatusForbidden, fmt.Errorf("report for zone %q sent to zone %q", r.Zone, s.cfg.Zone))
	}
	key, err := s.cfg.Keys.Key(r.KeyID)
	if err != nil {
		return reject(RejectUnknownKey, http.StatusUnauthorized, err)
	}
	if _, err := r.SigningBytes(); err != nil {
		return reject(RejectMalformed, http.StatusBadRequest, err)
	}
	if !r.VerifyMAC(key) {
		return reject(RejectBadMAC, http.StatusUnauthorized, ErrBadMAC)
	}
	m, ok := s.memberByNode(r.From)
	if !ok {
		return reject(RejectNotMember, http.StatusForbidden, fmt.Errorf("%w: %s", ErrNotMember, r.From))
	}
	// The zone key proves the report comes from inside the zone; the
	// node key that it comes from its sender. Every follower checks the
	// same signature again when it applies the batch; this member's own
	// replica finds it in s.sigs.
	if pub, err := zone.ParseNodeKey(m.PublicKey); err != nil || !r.VerifySigMemo(pub, s.sigs) {
		return reject(RejectBadSig, http.StatusUnauthorized, fmt.Errorf("%w: %s", ErrBadSig, r.From))
	}
	if skew := s.clock.Since(r.SentAt); skew > s.cfg.MaxClockSkew || skew < -s.cfg.MaxClockSkew {
		return reject(RejectClockSkew, http.StatusBadRequest, fmt.Errorf("sent-at is %s off the leader's clock (limit %s)", skew.Round(time.Millisecond), s.cfg.MaxClockSkew))
	}
	last := s.store.LastSeq(r.From)
	if r.Seq <= last {
		return reject(RejectReplay, http.StatusConflict, fmt.Errorf("%w: seq %d, last %d", ErrReplay, r.Seq, last))
	}
	if !store.SeqInReach(r, last) {
		return reject(RejectSeqJump, http.StatusBadRequest, fmt.Errorf("seq %d jumps more than %d past the last (%d) and the sent-at clock", r.Seq, uint64(store.MaxSeqJump), last))
	}
	return nil
}

// ErrQueued is submit's answer to a heartbeat that was verified and queued
// for the next batch: accepted, not yet committed.
var ErrQueued = errors.New("report queued for the next batch")

// submit verifies r and waits until it is committed or refused, or, for a
// heartbeat, until it is queued (ErrQueued).
func (in *intake) submit(ctx context.Context, r zone.Report) error {
	if in.s.Term() == 0 {
		return in.count(reject(RejectNotLeader, http.StatusMisdirectedRequest, ErrNotLeader))
	}
	if rj := in.verify(&r); rj != nil {
		return in.count(rj)
	}
	done := make(chan *RejectError, 1)
	in.mu.Lock()
	if in.stopped {
		in.mu.Unlock()
		return in.count(reject(RejectNotLeader, http.StatusMisdirectedRequest, fmt.Errorf("%w: member shutting down", ErrNotLeader)))
	}
	if r.Seq <= in.seqs[r.From] {
		in.mu.Unlock()
		return in.count(reject(RejectReplay, http.StatusConflict, fmt.Errorf("%w: seq %d already pending", ErrReplay, r.Seq)))
	}
	if len(in.pending) >= maxPending {
		in.mu.Unlock()
		return in.count(reject(RejectOverloaded, http.StatusServiceUnavailable, errors.New("too many reports pending")))
	}
	if in.counts[r.From] >= maxPendingPerSender {
		in.mu.Unlock()
		return in.count(reject(RejectOverloaded, http.StatusServiceUnavailable, fmt.Errorf("%s has %d reports pending already", r.From, maxPendingPerSender)))
	}
	in.counts[r.From]++
	in.seqs[r.From] = r.Seq
	in.pending = append(in.pending, pendingReport{r: r, done: done})
	urgent := len(r.Results) > 0
	in.urgent = in.urgent || urgent
	in.mu.Unlock()
	signal(in.kick)
	if !urgent {
		return ErrQueued
	}
	signal(in.hurry)
	select {
	case rj := <-done:
		if rj != nil {
			return rj
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (in *intake) count(rj *RejectError) error {
	in.s.metrics.reportsRejected.WithLabelValues(rj.Reason).Inc()
	return rj
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run commits pending reports: BatchWindow after the first report that
// changes something, else HeartbeatBatchWindow after the first heartbeat.
func (in *intake) run(ctx context.Context) {
	defer in.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.kick:
		}
		in.mu.Lock()
		urgent := in.urgent
		in.mu.Unlock()
		if !urgent {
			select {
			case <-ctx.Done():
				return
			case <-in.s.clock.After(in.s.cfg.heartbeatBatchWindow()):
			case <-in.hurry:
				urgent = true
			}
		}
		if urgent {
			select {
			case <-ctx.Done():
				return
			case <-in.s.clock.After(in.s.cfg.BatchWindow):
			}
		}
		in.commit(ctx)
	}
}

func (in *intake) commit(ctx context.Context) {
	in.mu.Lock()
	batch := in.pending
	in.pending, in.urgent = nil, false
	in.mu.Unlock()
	select { // this batch answers any hurry signalled so far
	case <-in.hurry:
	default:
	}
	if len(batch) == 0 {
		return
	}
	reports := make([]zone.Report, len(batch))
	changes := false
	for i, p := range batch {
		reports[i] = p.r
		changes = changes || len(p.r.Results) > 0
	}
	var result *RejectError
	cmd, err := in.s.encode(store.ReportBatch{At: in.s.clock.Now().UTC(), Reports: reports})
	if err == nil {
		_, err = in.s.apply(ctx, "reports", cmd)
	}
	switch {
	case err == nil:
		in.s.metrics.reportsAccepted.Add(float64(len(batch)))
		if changes {
			// Judge now what changed, not at the next vote tick.
			signal(in.s.voteKick)
		}
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		result = reject(RejectNotLeader, http.StatusMisdirectedRequest, err)
	default:
		result = reject(RejectCommitError, http.StatusServiceUnavailable, err)
	}
	if result != nil {
		in.s.metrics.reportsRejected.WithLabelValues(result.Reason).Add(float64(len(batch)))
	}
	in.mu.Lock()
	for _, p := range batch {
		// Committed seqs now live in the store; forget the pending marks
		// unless a newer report from the same sender is already queued.
		if in.seqs[p.r.From] == p.r.Seq {
			delete(in.seqs, p.r.From)
		}
		if in.counts[p.r.From]--; in.counts[p.r.From] <= 0 {
			delete(in.counts, p.r.From)
		}
	}
	in.mu.Unlock()
	for _, p := range batch {
		p.done <- result
	}
}

// stop refuses every pending and later report: run has returned.
func (in *intake) stop() {
	in.mu.Lock()
	in.stopped = true
	in.mu.Unlock()
	in.flush(reject(RejectNotLeader, http.StatusMisdirectedRequest, fmt.Errorf("%w: member shutting down", ErrNotLeader)))
}

func (in *intake) flush(err *RejectError) {
	in.mu.Lock()
	batch := in.pending
	in.pending, in.urgent = nil, false
	in.seqs = map[string]uint64{}
	in.counts = map[string]int{}
	in.mu.Unlock()
	if len(batch) > 0 {
		in.s.metrics.reportsRejected.WithLabelValues(err.Reason).Add(float64(len(batch)))
	}
	for _, p := range batch {
		p.done <- err
	}
}

// handleReport is POST /v1/reports on the peer API.
func (s *Member) handleReport(w http.ResponseWriter, r *http.Request) {
	var rep zone.Report
	if err := decodeBody(r, &rep); err != nil {
		rj := reject(RejectMalformed, http.StatusBadRequest, err)
		s.intake.count(rj)
		s.writeError(w, rj.Status, rj.Reason, rj)
		return
	}
	// A member reports only for itself: the sender the report names must be
	// the node its connection proved (the signature below says so again).
	if caller, ok := zoneport.CallerOf(r.Context()); !ok || caller.Node != rep.From {
		rj := reject(RejectNotSender, http.StatusForbidden, fmt.Errorf("report from %q sent by %q", rep.From, caller.Node))
		s.intake.count(rj)
		s.writeError(w, rj.Status, rj.Reason, rj)
		return
	}
	err := s.intake.submit(r.Context(), rep)
	var rj *RejectError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, s.rowAnswer(rep.From, false))
	case errors.Is(err, ErrQueued):
		writeJSON(w, http.StatusAccepted, s.rowAnswer(rep.From, true))
	case errors.As(err, &rj):
		s.writeError(w, rj.Status, rj.Reason, rj)
	default:
		s.writeError(w, http.StatusServiceUnavailable, "canceled", err)
	}
}

// reportAnswer is the body of a 2xx answer to POST /v1/reports: Queued for a
// heartbeat answered before its batch commits (202), absent once committed
// (200). A sender of an earlier release reads any 2xx as delivered and
// ignores the rest.
type reportAnswer struct {
	Queued bool `json:"queued,omitempty"`
	// Checked says the leader looked at its replica's row of the sender,
	// and Lacks names the members that row holds no result about
	// (reporter.go). A leader of an earlier release sets neither, and its
	// senders fall back to a full report every fullUncheckedPeriod.
	Checked bool     `json:"checked,omitempty"`
	Lacks   []string `json:"lacks,omitempty"`
}

// rowAnswer is the answer to a report of from that was committed or queued:
// what this leader's replica lacks of from's row. A store that cannot say
// leaves Checked unset, and the sender sends every result now and then.
func (s *Member) rowAnswer(from string, queued bool) reportAnswer {
	a := reportAnswer{Queued: queued}
	lacks, err := s.store.RowGaps(from)
	if err != nil {
		s.log.Debug("row gaps for a report's answer", "from", from, "err", err)
		return a
	}
	a.Checked, a.Lacks = true, lacks
	return a
}
