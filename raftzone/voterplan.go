package raftzone

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// desiredVoters is the voter count for a zone of m members: every member while
// the zone is no larger than --voters (which is odd), else --voters. A small zone
// of even size therefore has an even voter set, on purpose: when it splits in
// half neither half can commit, and neither half should judge the other dead —
// from inside a split there is no telling which half failed.
func desiredVoters(m, limit int) int {
	return max(min(m, limit), 1)
}

// seat is what the voter planner knows of one member.
type seat struct {
	id, node string
	self     bool
	voter    bool
	// spare: the member is outside the Raft configuration.
	spare bool
	// eligible: a nonvoter or spare the zone has no reason to distrust — not judged
	// unhealthy, and either reporting or joined too recently to have
	// reported. It still has to pass the live check before it votes.
	eligible bool
	// unhealthy: a voter that has not reported within the vote timeout, or
	// that the zone judged unhealthy; dead once it stayed so for
	// --dead-voter-timeout.
	unhealthy, dead bool
	api             bool
	joinedAt        time.Time
}

// voterInputs is what the leader knows when it places votes: the member list,
// the Raft configuration, the zone's committed reports and verdicts, and its
// own reach of the apiserver.
type voterInputs struct {
	now         time.Time
	self        string
	selfAPI     bool
	members     []zone.Member
	config      map[string]raft.Server
	lastReports map[string]store.LastReport
	verdicts    map[string]zone.Verdict

	voteTimeout, deadVoterTimeout time.Duration
}

// promoter remembers, for one leadership term, since when each voter has looked
// unhealthy, so a voter is replaced only after --dead-voter-timeout.
type promoter struct {
	unhealthySince map[string]time.Time
}

func newPromoter() *promoter { return &promoter{unhealthySince: map[string]time.Time{}} }

// classify turns what the leader knows into one seat per member; members
// outside the Raft configuration are spares. A member is healthy when it reported within the vote timeout
// and the zone has not judged it unhealthy (the leader itself always is); a
// nonvoter is eligible when healthy, or when it joined within the vote timeout
// and has not reported yet (a forming zone gets its voters at once); a voter
// that is not healthy is unhealthy, and dead once it stayed so for the
// dead-voter timeout.
func (p *promoter) classify(in voterInputs) []seat {
	seats := make([]seat, 0, len(in.members))
	for _, m := range in.members {
		srv, ok := in.config[m.ServerID]
		st := seat{id: m.ServerID, node: m.Node, self: m.Node == in.self, voter: ok && srv.Suffrage == raft.Voter,
			spare: !ok, joinedAt: m.JoinedAt}
		lr, reported := in.lastReports[m.Node]
		judged := in.verdicts[m.Node].State == zone.Unhealthy
		var healthy bool
		switch {
		case st.self:
			healthy, st.api = true, in.selfAPI
		case reported && in.now.Sub(lr.ReceivedAt) <= in.voteTimeout:
			healthy, st.api = !judged, lr.APIReachable
		}
		newcomer := !reported && !judged && in.now.Sub(m.JoinedAt) <= in.voteTimeout
		st.eligible = !st.voter && (healthy || newcomer)
		if st.voter && !healthy {
			if _, ok := p.unhealthySince[m.ServerID]; !ok {
				p.unhealthySince[m.ServerID] = in.now
			}
			st.unhealthy = true
			st.dead = in.now.Sub(p.unhealthySince[m.ServerID]) >= in.deadVoterTimeout
		} else {
			delete(p.unhealthySince, m.ServerID)
		}
		seats = append(seats, st)
	}
	return seats
}

// voterPlan is what the leader should change in the Raft configuration, in
// order: promotions first, so a replacement never lowers the zone's fault
// tolerance in between.
type voterPlan struct {
	promote, demote []seat
	// skipped are the candidates that failed their live check.
	skipped []seat
	// short is true when the zone has fewer voters than it wants and an
	// eligible member could not be promoted: the leader should look again
	// soon rather than at its next reconcile tick.
	short bool
}

// planVoters decides promotions and demotions for a zone that wants `want`
// voters; only stand-bys (nonvoters in the configuration) are candidates. It is pure but for live, the check each candidate must pass right
// before its promotion (is it alive and caught up?); live is called only for
// the candidates the plan needs, best first, so a zone at its target makes no
// calls at all.
//
// The rules: keep `want` voters, preferring members that reach the apiserver,
// then the longest-standing; replace voters dead for --dead-voter-timeout;
// grow from an odd count in pairs; demote the worst voters beyond want — dead,
// then unhealthy, then those without the apiserver — and never the leader.
func planVoters(seats []seat, want int, live func(seat) bool) voterPlan {
	var voters, spares []seat
	dead := 0
	for _, s := range seats {
		switch {
		case s.voter:
			voters = append(voters, s)
			if s.dead {
				dead++
			}
		case s.eligible && !s.spare:
			spares = append(spares, s)
		}
	}
	// Best stand-bys first: reach the apiserver, then longest-standing, then name.
	slices.SortFunc(spares, func(a, b seat) int {
		if a.api != b.api {
			if a.api {
				return -1
			}
			return 1
		}
		if c := a.joinedAt.Compare(b.joinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.node, b.node)
	})
	var plan voterPlan
	need := max(0, want-len(voters)+dead)
	var ready []seat
	for _, s := range spares {
		if len(ready) >= need {
			break
		}
		if !live(s) {
			plan.skipped = append(plan.skipped, s)
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
	plan.promote = ready[:promote]
	plan.short = len(voters)+promote < want && len(plan.skipped) > 0

	voters = append(voters, plan.promote...)
	excess := len(voters) - want
	if excess <= 0 {
		return plan
	}
	rank := func(s seat) int {
		switch {
		case s.dead:
			return 0
		case s.unhealthy:
			return 1
		case !s.api:
			return 2
		}
		return 3
	}
	slices.SortStableFunc(voters, func(a, b seat) int { return rank(a) - rank(b) })
	for _, s := range voters {
		if excess == 0 {
			break
		}
		if s.self {
			continue
		}
		plan.demote = append(plan.demote, s)
		excess--
	}
	return plan
}

// planStandbys decides which members should be stand-bys (Raft nonvoters) in
// a zone that wants `want` of them: every other non-voting member is a spare.
// It keeps the best `want` of the stand-bys and the eligible spares — eligible
// before not, a present stand-by before a spare (a stand-by has its replica,
// a spare has none), then reaching the apiserver, longest-standing, name — so a
// healthy stand-by is never swapped for an equal spare, and a dead one is
// replaced once a healthy spare can take its seat. add are the spares to add,
// remove the stand-bys to take out.
func planStandbys(seats []seat, want int) (add, remove []seat) {
	var cands []seat
	for _, s := range seats {
		if s.voter || s.self || (s.spare && !s.eligible) {
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
	slices.SortFunc(cands, func(a, b seat) int {
		if c := flag(a.eligible) - flag(b.eligible); c != 0 {
			return c
		}
		if c := flag(!a.spare) - flag(!b.spare); c != 0 {
			return c
		}
		if c := flag(a.api) - flag(b.api); c != 0 {
			return c
		}
		if c := a.joinedAt.Compare(b.joinedAt); c != 0 {
			return c
		}
		return strings.Compare(a.node, b.node)
	})
	for i, s := range cands {
		switch keep := i < want; {
		case keep && s.spare:
			add = append(add, s)
		case !keep && !s.spare:
			remove = append(remove, s)
		}
	}
	return add, remove
}

// desiredStandbys is how many stand-bys a zone of m members with `voters`
// voters should keep: --standbys, plus a seat for every voter it still lacks
// (a member becomes a voter only from stand-by), but no more than the members
// that do not vote.
func desiredStandbys(m, voters, voterLimit, standbys int) int {
	lacking := max(0, desiredVoters(m, voterLimit)-voters)
	return max(0, min(standbys+lacking, m-voters))
}
