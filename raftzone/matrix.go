package raftzone

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// This file answers "who sees whom": the zone's committed opinion matrix
// (checker × target) as an operator reads it, for `edgequorum status --matrix`
// and the status server's picture of it. It reads what the verdict rule reads
// and judges freshness as that rule does, so a cell shown stale is one the
// leader does not count.

// CellState is what one checker's committed opinion of one target counts for.
type CellState string

const (
	// CellReached: the checker's fresh opinion is that the target is up.
	CellReached CellState = "reached"
	// CellFailed: the checker's fresh opinion is that the target is down.
	CellFailed CellState = "failed"
	// CellStale: the checker has an opinion, but its last report is older
	// than the zone's vote timeout, so the verdict rule does not count it.
	CellStale CellState = "stale"
	// CellNone: the checker has no committed opinion of the target (or the
	// target is the checker itself: a node never votes for itself).
	CellNone CellState = "none"
)

// MatrixView is one member's picture of its zone's committed opinion matrix,
// rows = checkers, columns = targets, both in Members order. It is what
// /v1/status/matrix serves and `edgequorum status --matrix` prints or draws.
//
// A cell is stale when the checker's last committed report is missing, or
// older (or, from a leader whose clock is behind, newer) than VoteTimeout at
// At: exactly the opinions store.Tally leaves out. A cell's own time is not
// the rule: a report carries only the results that changed, so a steady
// opinion is confirmed by every report of its checker and its cell keeps the
// time it last changed (SinceSeconds).
type MatrixView struct {
	Zone string `json:"zone"`
	// Node is the member whose committed view this is.
	Node   string `json:"node"`
	Term   uint64 `json:"term"`
	Leader string `json:"leader,omitempty"`
	// At is when the view was taken; every age is counted to it.
	At time.Time `json:"at"`
	// VoteTimeoutSeconds is the freshness bound of the stale rule.
	VoteTimeoutSeconds float64 `json:"voteTimeoutSeconds"`
	// Partial is set when the view comes from a spare's copy, which holds
	// only the spare's own row: ask the leader's view for the whole zone.
	Partial bool `json:"partial,omitempty"`
	// Members are the zone's members, sorted by node name.
	Members []string    `json:"members"`
	Rows    []MatrixRow `json:"rows"`
}

// MatrixRow is one checker's opinions and the zone's committed verdict on the
// checker itself.
type MatrixRow struct {
	Checker string `json:"checker"`
	// Verdict is the committed verdict on Checker (unknown when the zone
	// has committed none), Pros and Cons the votes it was decided by.
	Verdict zone.State `json:"verdict"`
	Pros    int        `json:"pros"`
	Cons    int        `json:"cons"`
	// LastReportAgeSeconds is the age of the checker's last committed
	// report; absent when it never reported.
	LastReportAgeSeconds *float64 `json:"lastReportAgeSeconds,omitempty"`
	// Cells[j] is Checker's opinion of Members[j]. Aligned cells, rather
	// than a map by name, keep a zone of 129 (16,641 cells) within what a
	// peer answer may carry.
	Cells []MatrixCell `json:"cells"`
}

// MatrixCell is one checker's committed opinion of one target.
type MatrixCell struct {
	State          CellState `json:"state"`
	OK             bool      `json:"ok,omitempty"`
	Score          float64   `json:"score,omitempty"`
	LatencySeconds float64   `json:"latencySeconds,omitempty"`
	// AgeSeconds is the age of the checker's last report, which confirms
	// every cell of its row; absent for a cell with no opinion or a checker
	// that never reported.
	AgeSeconds *float64 `json:"ageSeconds,omitempty"`
	// SinceSeconds is how long the opinion has held: the age of the report
	// that last changed it.
	SinceSeconds *float64 `json:"sinceSeconds,omitempty"`
}

// Matrix returns this member's committed view of the zone's opinion matrix,
// read from the store its status reads (s.state()): the replica the leader
// commits to, or on a spare the view it copies, which holds the spare's own
// row only (Partial). Members, reports, cells and verdicts come from one read
// transaction, so they agree.
func (s *Member) Matrix() (MatrixView, error) {
	if !s.isStarted() {
		return MatrixView{}, errors.New("zone member not started")
	}
	src := s.state()
	in, err := src.TallyInput()
	if err != nil {
		return MatrixView{}, fmt.Errorf("read the zone's matrix: %w", err)
	}
	v := buildMatrix(in, s.clock.Now().UTC(), s.cfg.VoteTimeout)
	v.Zone, v.Node = s.cfg.Zone, s.cfg.Node
	v.Leader, _, _ = s.Leader()
	if src == s.viewStore {
		v.Term, v.Partial = s.cluster().Term, true
	} else {
		v.Term = s.raft.CurrentTerm()
	}
	return v, nil
}

// buildMatrix lays out the committed evidence in as the view shows it: every
// age counted to now, and a cell stale by store.Tally's rule, so a picture
// never shows as a vote what the verdicts do not count.
func buildMatrix(in store.TallyInput, now time.Time, voteTimeout time.Duration) MatrixView {
	names := make([]string, 0, len(in.Members))
	for _, m := range in.Members {
		names = append(names, m.Node)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	v := MatrixView{At: now, VoteTimeoutSeconds: voteTimeout.Seconds(), Members: names,
		Rows: make([]MatrixRow, 0, len(names))}
	for _, checker := range names {
		row := MatrixRow{Checker: checker, Verdict: zone.Unknown, Cells: make([]MatrixCell, len(names))}
		if vd, ok := in.Verdicts[checker]; ok {
			row.Verdict, row.Pros, row.Cons = vd.State, vd.Pros, vd.Cons
		}
		lr, reported := in.Last[checker]
		age := now.Sub(lr.ReceivedAt)
		fresh := reported && age <= voteTimeout && age >= -voteTimeout
		if reported {
			row.LastReportAgeSeconds = seconds(age)
		}
		cells := in.Matrix[checker]
		for j, target := range names {
			c, ok := cells[target]
			if !ok || target == checker {
				row.Cells[j] = MatrixCell{State: CellNone}
				continue
			}
			mc := MatrixCell{OK: c.OK, Score: c.Score, LatencySeconds: c.Latency.Round(time.Microsecond).Seconds(),
				SinceSeconds: seconds(now.Sub(c.At))}
			if reported {
				mc.AgeSeconds = row.LastReportAgeSeconds
			}
			switch {
			case !fresh:
				mc.State = CellStale
			case c.OK:
				mc.State = CellReached
			default:
				mc.State = CellFailed
			}
			row.Cells[j] = mc
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// seconds is d in seconds to the millisecond, for ages: finer is noise to a
// reader and bytes in a zone of 16k cells. (Latencies keep microseconds: on a
// site's LAN they are below a millisecond.)
func seconds(d time.Duration) *float64 {
	s := math.Round(d.Seconds()*1000) / 1000
	return &s
}

// Cell returns checker's opinion of target and whether both are members.
func (v MatrixView) Cell(checker, target string) (MatrixCell, bool) {
	i, ok := slices.BinarySearch(v.Members, checker)
	if !ok || i >= len(v.Rows) {
		return MatrixCell{}, false
	}
	j, ok := slices.BinarySearch(v.Members, target)
	if !ok || j >= len(v.Rows[i].Cells) {
		return MatrixCell{}, false
	}
	return v.Rows[i].Cells[j], true
}

// maxMatrixAnswer bounds a leader's matrix answer on the peer API: a zone of
// 129 members is about 2 MB of JSON, more than maxPeerBody allows a request.
const maxMatrixAnswer = 16 << 20

// FetchLeaderMatrix returns the leader's view of the matrix, asking the leader
// over the peer API when this member is a follower or a spare: the leader's
// replica holds every row, a spare's view only its own.
func (s *Member) FetchLeaderMatrix(ctx context.Context) (MatrixView, error) {
	if s.Term() != 0 {
		return s.Matrix()
	}
	_, addr, ok := s.Leader()
	if !ok {
		return MatrixView{}, errors.New("no zone leader is known")
	}
	var v MatrixView
	if err := s.callPeerLimit(ctx, addr, "/v1/matrix", nil, &v, maxMatrixAnswer); err != nil {
		var pe *PeerError
		if errors.As(err, &pe) && pe.Status == http.StatusNotFound {
			return MatrixView{}, fmt.Errorf("fetch the matrix from leader %s: its release does not serve it; upgrade it: %w", addr, err)
		}
		return MatrixView{}, fmt.Errorf("fetch the matrix from leader %s: %w", addr, err)
	}
	return v, nil
}

// matrixCache keeps the peer API's matrix answer for a second: any member may
// ask, and in a zone of 129 each answer reads 16k cells and sends megabytes.
type matrixCache struct {
	mu  sync.Mutex
	at  time.Time
	v   MatrixView
	err error
}

const matrixCacheFor = time.Second

func (c *matrixCache) get(build func() (MatrixView, error)) (MatrixView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < matrixCacheFor {
		return c.v, c.err
	}
	c.v, c.err = build()
	c.at = time.Now()
	return c.v, c.err
}

// handleMatrix is GET /v1/matrix on the peer API: this member's matrix, which
// a follower's agent asks the leader for (`edgequorum status --matrix
// --leader`).
func (s *Member) handleMatrix(w http.ResponseWriter, _ *http.Request) {
	v, err := s.matrixAnswers.get(s.Matrix)
	if err != nil {
		s.writeError(w, http.StatusServiceUnavailable, "matrix", err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
