package seats

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// DesiredVoters is the voter count for a zone of m members: every member while
// the zone is no larger than --voters (which is odd), else --voters. A small zone
// of even size therefore has an even voter set, on purpose: when it splits in
// half neither half can commit, and neither half should judge the other dead —
// from inside a split there is no telling which half failed.
func DesiredVoters(m, limit int) int {
	return max(min(m, limit), 1)
}

// Seat is what the voter planner knows of one member.
type Seat struct {
	ID, Node string
	// Self is the leader planning.
	Self  bool
	Voter bool
	// Spare: the member is outside the Raft configuration.
	Spare bool
	// Eligible: a nonvoter or spare the zone has no reason to distrust — not judged
	// unhealthy, and either reporting or joined too recently to have
	// reported. It still has to pass the live check before it votes.
	Eligible bool
	// Unhealthy: a voter that has not reported within the vote timeout, or
	// that the zone judged unhealthy; Dead once it stayed so for
	// --dead-voter-timeout.
	Unhealthy, Dead bool
	// API: the member reaches the apiserver, as it last reported.
	API      bool
	JoinedAt time.Time
}

// Inputs is what the leader knows when it places votes: the member list,
// the Raft configuration, the zone's committed reports and verdicts, and its
// own reach of the apiserver.
type Inputs struct {
	Now         time.Time
	Self        string
	SelfAPI     bool
	Members     []zone.Member
	Config      map[string]raft.Server
	LastReports map[string]store.LastReport
	Verdicts    map[string]zone.Verdict

	VoteTimeout, DeadVoterTimeout time.Duration
}

// Promoter remembers, for one leadership term, since when each voter has looked
// unhealthy, so a voter is replaced only after --dead-voter-timeout.
type Promoter struct {
	unhealthySince map[string]time.Time
}

// NewPromoter returns a Promoter for a new leadership term.
func NewPromoter() *Promoter { return &Promoter{unhealthySince: map[string]time.Time{}} }

// Classify turns what the leader knows into one Seat per member; members
// outside the Raft configuration are spares. A member is healthy when it reported within the vote timeout
// and the zone has not judged it unhealthy (the leader itself always is); a
// nonvoter is eligible when healthy, or when it joined within the vote timeout
// and has not reported yet (a forming zone gets its voters at once); a voter
// that is not healthy is unhealthy, and dead once it stayed so for the
// dead-voter timeout.
func (p *Promoter) Classify(in Inputs) []Seat {
	seats := make([]Seat, 0, len(in.Members))
	for _, m := range in.Members {
		srv, ok := in.Config[m.ServerID]
		st := Seat{ID: m.ServerID, Node: m.Node, Self: m.Node == in.Self, Voter: ok && srv.Suffrage == raft.Voter,
			Spare: !ok, JoinedAt: m.JoinedAt}
		lr, reported := in.LastReports[m.Node]
		judged := in.Verdicts[m.Node].State == zone.Unhealthy
		var healthy bool
		switch {
		case st.Self:
			healthy, st.API = true, in.SelfAPI
		case reported && in.Now.Sub(lr.ReceivedAt) <= in.VoteTimeout:
			healthy, st.API = !judged, lr.APIReachable
		}
		newcomer := !reported && !judged && in.Now.Sub(m.JoinedAt) <= in.VoteTimeout
		st.Eligible = !st.Voter && (healthy || newcomer)
		if st.Voter && !healthy {
			if _, ok := p.unhealthySince[m.ServerID]; !ok {
				p.unhealthySince[m.ServerID] = in.Now
			}
			st.Unhealthy = true
			st.Dead = in.Now.Sub(p.unhealthySince[m.ServerID]) >= in.DeadVoterTimeout
		} else {
			delete(p.unhealthySince, m.ServerID)
		}
		seats = append(seats, st)
	}
	return seats
}

// Plan is what the leader should change in the Raft configuration, in
// order: promotions first, so a replacement never lowers the zone's fault
// tolerance in between.
type Plan struct {
	Promote, Demote []Seat
	// Skipped are the candidates that failed their live check.
	Skipped []Seat
	// Short is true when the zone has fewer voters than it wants and an
	// eligible member could not be promoted: the leader should look again
	// soon rather than at its next reconcile tick.
	Short bool
}

// PlanVoters decides promotions and demotions for a zone that wants `want`
// voters; only stand-bys (nonvoters in the configuration) are candidates. It is pure but for live, the check each candidate must pass right
// before its promotion (is it alive and caught up?); live is called only for
// the candidates the plan needs, best first, so a zone at its target makes no
// calls at all.
//
// The rules: keep `want` voters, preferring members that reach the apiserver,
// then the longest-standing; replace voters dead for --dead-voter-timeout;
// grow from an odd count in pairs; demote the worst voters beyond want — dead,
// then unhealthy, then those without the apiserver — and never the leader.
func PlanVoters(seats []Seat, want int, live func(Seat) bool) Plan {
	var voters, spares []Seat
	dead := 0
	for _, s := range seats {
		switch {
		case s.Voter:
			voters = append(voters, s)
			if s.Dead {
				dead++
			}
		case s.Eligible && !s.Spare:
			spares = append(spares, s)
		}
	}
	// Best stand-bys first: reach the apiserver, then longest-standing, then name.
	slices.SortFunc(spares, func(a, b Seat) int {
		if a.API != b.API {
			if a.API {
				return -1
			}
			return 1
		}
		if c := a.JoinedAt.Compare(b.JoinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	var plan Plan
	need := max(0, want-len(voters)+dead)
	var ready []Seat
	for _, s := range spares {
		if len(ready) >= need {
			break
		}
		if !live(s) {
			plan.Skipped = append(plan.Skipped, s)
			continue
		}
		ready = append(ready, s)
	}
	promote := len(ready)
	// Grow from an odd voter count in pairs: an even count below the target
	// tolerates no more failures than one voter fewer, but has one more node
	// whose death costs the quorum — two voters are the worst case, where
	// either death stalls the zone. A replacement's demotion follows at once.
	if n := len(voters) + promote; promote > 0 && dead == 0 && n%2 == 0 && n < want {
		promote--
	}
	plan.Promote = ready[:promote]
	plan.Short = len(voters)+promote < want && len(plan.Skipped) > 0

	voters = append(voters, plan.Promote...)
	excess := len(voters) - want
	if excess <= 0 {
		return plan
	}
	rank := func(s Seat) int {
		switch {
		case s.Dead:
			return 0
		case s.Unhealthy:
			return 1
		case !s.API:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(voters, func(a, b Seat) int { return rank(a) - rank(b) })
	for _, s := range voters {
		if excess == 0 {
			break
		}
		if s.Self {
			continue
		}
		plan.Demote = append(plan.Demote, s)
		excess--
	}
	return plan
}

// PlanStandbys decides which members should be stand-bys (Raft nonvoters) in
// a zone that wants `want` of them: every other non-voting member is a spare.
// It keeps the best `want` of the stand-bys and the eligible spares — eligible
// before not, a present stand-by before a spare (a stand-by has its replica,
// a spare has none), then reaching the apiserver, longest-standing, name — so a
// healthy stand-by is never swapped for an equal spare, and a dead one is
// replaced once a healthy spare can take its Seat. add are the spares to add,
// remove the stand-bys to take out.
func PlanStandbys(seats []Seat, want int) (add, remove []Seat) {
	var cands []Seat
	for _, s := range seats {
		if s.Voter || s.Self || (s.Spare && !s.Eligible) {
			continue
		}
		cands = append(cands, s)
	}
	flag := func(b bool) int {
		if b {
			return 0
		}
		return 1
	}
	slices.SortFunc(cands, func(a, b Seat) int {
		if c := flag(a.Eligible) - flag(b.Eligible); c != 0 {
			return c
		}
		if c := flag(!a.Spare) - flag(!b.Spare); c != 0 {
			return c
		}
		if c := flag(a.API) - flag(b.API); c != 0 {
			return c
		}
		if c := a.JoinedAt.Compare(b.JoinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	for i, s := range cands {
		switch keep := i < want; {
		case keep && s.Spare:
			add = append(add, s)
		case !keep && !s.Spare:
			remove = append(remove, s)
		}
	}
	return add, remove
}

// DesiredStandbys is how many stand-bys a zone of m members with `voters`
// voters should keep: --standbys, plus a Seat for every voter it still lacks
// (a member becomes a voter only from stand-by), but no more than the members
// that do not vote.
func DesiredStandbys(m, voters, voterLimit, standbys int) int {
	lacking := max(0, DesiredVoters(m, voterLimit)-voters)
	return max(0, min(standbys+lacking, m-voters))
}
