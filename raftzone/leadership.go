package raftzone

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// Leadership is this member's standing as its zone's leader: the term it leads
// in, and how to have a quorum confirm that it still does. Every write out of
// the zone is fenced by it, so a deposed leader cannot overwrite its successor.
//
// It exists apart from the Member so that a member is built in one direction:
// the API writer fences with a Leadership made before either of them, and the
// Member, built next, delivers its verdicts to that writer and publishes its
// terms here. Before the Member leads, and after it stops, there is no term.
type Leadership struct {
	cur atomic.Pointer[leaderTerm]
	// zoneSize is the member count the leader last committed, for the zone
	// Lease.
	zoneSize atomic.Int64
	// zoneLevel is the zone's protocol level as this member's replica
	// last found it (skew.Unannounced before it did).
	zoneLevel atomic.Uint32
	owned     atomic.Bool
}

// leaderTerm is one term this member leads in; confirm asks a quorum.
type leaderTerm struct {
	term    uint64
	confirm func(ctx context.Context) error
}

// NewLeadership returns a Leadership that holds no term until a Member leads.
func NewLeadership() *Leadership { return &Leadership{} }

// Term is the term this member believes it leads in, unconfirmed, or 0 when it
// does not lead.
func (l *Leadership) Term() uint64 {
	if t := l.cur.Load(); t != nil {
		return t.term
	}
	return 0
}

// VerifyLeader confirms with a quorum that this member still leads and returns
// the term its writes must carry. Callers write to the Kubernetes API only
// after it succeeds.
func (l *Leadership) VerifyLeader(ctx context.Context) (uint64, error) {
	t := l.cur.Load()
	if t == nil {
		return 0, ErrNotLeader
	}
	if err := t.confirm(ctx); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	// The term must still be the one confirmed: leadership lost and won again
	// in between is a new term, and the caller stamped its write with the old.
	if l.cur.Load() != t {
		return 0, ErrNotLeader
	}
	return t.term, nil
}

// MemberCount is how many members the zone had when its leader last committed the
// member list (0 before that).
func (l *Leadership) MemberCount() int { return int(l.zoneSize.Load()) }

// ZoneLevel is the protocol level every member of the zone reads, as this
// member's replica last found it, or skew.Unannounced before it did: the
// writer keeps the API formats at or below it.
func (l *Leadership) ZoneLevel() skew.Level { return skew.Level(l.zoneLevel.Load()) }

// begin publishes a term this member leads in; end withdraws it.
func (l *Leadership) begin(term uint64, confirm func(context.Context) error) {
	l.cur.Store(&leaderTerm{term: term, confirm: confirm})
}

func (l *Leadership) end() { l.cur.Store(nil) }

func (l *Leadership) setZoneSize(ms []zone.Member) { l.zoneSize.Store(int64(len(ms))) }

// claim binds l to one Member: two Members publishing terms into one
// Leadership would fence each other's writes with the wrong term.
func (l *Leadership) claim() error {
	if !l.owned.CompareAndSwap(false, true) {
		return fmt.Errorf("raftzone: Deps.Leadership already belongs to another Member")
	}
	return nil
}
