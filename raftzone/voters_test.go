package raftzone

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
)

func TestPlanVoters(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	voter := func(n string) seat { return seat{id: n, node: n, voter: true, api: true, joinedAt: t0} }
	spare := func(n string, joined int) seat {
		return seat{id: n, node: n, eligible: true, api: true, joinedAt: t0.Add(time.Duration(joined) * time.Second)}
	}
	self := func(s seat) seat { s.self = true; return s }
	noAPI := func(s seat) seat { s.api = false; return s }
	sick := func(s seat) seat { s.unhealthy = true; return s }
	dead := func(s seat) seat { s.unhealthy, s.dead = true, true; return s }
	ineligible := func(s seat) seat { s.eligible = false; return s }
	outside := func(s seat) seat { s.spare = true; return s }
	for _, tc := range []struct {
		name    string
		seats   []seat
		want    int
		fails   []string // candidates that fail the live check
		promote []string
		demote  []string
		short   bool
		checked []string // live checks made, in order
	}{
		{name: "one member", seats: []seat{self(voter("a"))}, want: 1,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "a zone of two makes both voters", seats: []seat{self(voter("a")), spare("b", 1)}, want: 2,
			promote: []string{"b"}, demote: []string{}, checked: []string{"b"}},
		{name: "grows 1 to 3 in a pair", seats: []seat{self(voter("a")), spare("b", 1), spare("c", 2)}, want: 3,
			promote: []string{"b", "c"}, demote: []string{}, checked: []string{"b", "c"}},
		{name: "no pair below the target", seats: []seat{self(voter("a")), spare("b", 1), spare("c", 2), spare("d", 3), spare("e", 4)}, want: 5,
			fails: []string{"c", "d", "e"}, promote: []string{}, demote: []string{}, short: true, checked: []string{"b", "c", "d", "e"}},
		{name: "odd count stays odd below the target", seats: []seat{self(voter("a")), voter("b"), voter("c"), spare("d", 3), spare("e", 4)}, want: 5,
			fails: []string{"e"}, promote: []string{}, demote: []string{}, short: true, checked: []string{"d", "e"}},
		{name: "even zone makes everyone a voter", seats: []seat{self(voter("a")), voter("b"), voter("c"), spare("d", 3)}, want: 4,
			promote: []string{"d"}, demote: []string{}, checked: []string{"d"}},
		{name: "apiserver reach first, then seniority", seats: []seat{self(voter("a")), noAPI(spare("b", 1)), spare("d", 3), spare("c", 2)}, want: 3,
			promote: []string{"c", "d"}, demote: []string{}, checked: []string{"c", "d"}},
		{name: "failed check falls to the next", seats: []seat{self(voter("a")), spare("b", 1), spare("c", 2), spare("d", 3)}, want: 3,
			fails: []string{"b"}, promote: []string{"c", "d"}, demote: []string{}, checked: []string{"b", "c", "d"}},
		{name: "ineligible never checked", seats: []seat{self(voter("a")), ineligible(spare("b", 1)), spare("c", 2)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{"c"}},
		{name: "at target: no calls", seats: []seat{self(voter("a")), voter("b"), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "sick voter is not replaced before it is dead", seats: []seat{self(voter("a")), sick(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "dead voter replaced, then demoted", seats: []seat{self(voter("a")), dead(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{"d"}, demote: []string{"b"}, checked: []string{"d"}},
		{name: "dead voter kept when no candidate passes", seats: []seat{self(voter("a")), dead(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			fails: []string{"d"}, promote: []string{}, demote: []string{}, checked: []string{"d"}},
		{name: "a spare is no candidate, though eligible", seats: []seat{self(voter("a")), outside(spare("b", 1)), spare("c", 2), spare("d", 3)}, want: 3,
			promote: []string{"c", "d"}, demote: []string{}, checked: []string{"c", "d"}},
		{name: "excess demoted worst first, never the leader", seats: []seat{self(noAPI(voter("a"))), voter("b"), noAPI(voter("c")), sick(voter("d")), voter("e")}, want: 3,
			promote: []string{}, demote: []string{"d", "c"}, checked: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked := []string{}
			plan := planVoters(tc.seats, tc.want, func(s seat) bool {
				checked = append(checked, s.node)
				return !slices.Contains(tc.fails, s.node)
			})
			if got := seatNames(plan.promote); !slices.Equal(got, tc.promote) {
				t.Errorf("promote %v, want %v", got, tc.promote)
			}
			if got := seatNames(plan.demote); !slices.Equal(got, tc.demote) {
				t.Errorf("demote %v, want %v", got, tc.demote)
			}
			if plan.short != tc.short {
				t.Errorf("short %v, want %v", plan.short, tc.short)
			}
			if !slices.Equal(checked, tc.checked) {
				t.Errorf("live checks %v, want %v", checked, tc.checked)
			}
		})
	}
}

// TestFormationDoesNotWaitForTicks starts a zone whose reconcile tick never
// comes: members joining must still become voters, up to --voters, because a
// join starts a round at once. Before, a new zone kept one voter until the
// tick, and losing its founder then left it leaderless for good.
func TestFormationDoesNotWaitForTicks(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) { c.ReconcilePeriod = time.Hour }
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	st := l.srv.Status()
	if st.Forming || st.Voters != 5 || st.WantVoters != 5 {
		t.Errorf("status says forming=%v with %d of %d voters, want a formed zone of 5", st.Forming, st.Voters, st.WantVoters)
	}
	// The founder can now die without taking the zone with it.
	z.stop(l.name)
	if nl := z.waitLeader(60 * time.Second); nl == l {
		t.Fatal("no new leader")
	}
}

// TestDeadNonvoterNotPromoted kills a nonvoter whose last report is still fresh
// together with a voter: the replacement for the voter must pass the live
// check, so the dead nonvoter, which looks healthy on paper, is never chosen.
// Promoting it would leave a zone of three voters with two dead, which can
// neither commit nor elect a leader until one returns.
func TestDeadNonvoterNotPromoted(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) {
		c.Voters = 3
		c.ReconcilePeriod = 200 * time.Millisecond
		c.DeadVoterTimeout = time.Second
		c.VoteTimeout = time.Minute // the dead nonvoter's last report stays fresh
	}
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	cfg, _ := l.srv.configuration()
	var deadVoter, deadSpare *testNode
	for _, n := range z.running() {
		switch {
		case n == l:
		case cfg[n.srv.ServerID()].Suffrage == raft.Voter && deadVoter == nil:
			deadVoter = n
		case cfg[n.srv.ServerID()].Suffrage == raft.Nonvoter && deadSpare == nil:
			deadSpare = n
		}
	}
	spareID, voterID := deadSpare.srv.ServerID(), deadVoter.srv.ServerID()
	z.stop(deadVoter.name)
	z.stop(deadSpare.name)
	poll.Until(t, 60*time.Second, "dead voter replaced by the live nonvoter", func() (bool, string) {
		cfg, err := l.srv.configuration()
		if err != nil {
			return false, err.Error()
		}
		if cfg[spareID].Suffrage == raft.Voter {
			t.Fatalf("the dead %s was promoted", deadSpare.name)
		}
		var voters []string
		for _, n := range z.running() {
			if cfg[n.srv.ServerID()].Suffrage == raft.Voter {
				voters = append(voters, n.name)
			}
		}
		return len(voters) == 3 && cfg[voterID].Suffrage != raft.Voter, fmt.Sprintf("live voters %v", voters)
	})
	// The zone still commits: both dead members are judged.
	z.waitVerdicts(60*time.Second, map[string]zone.State{deadVoter.name: zone.Unhealthy, deadSpare.name: zone.Unhealthy})
	if got := testutil.ToFloat64(l.srv.metrics.membershipChanges.WithLabelValues("promote")); got < 3 {
		t.Errorf("promote counted %v times, want at least 3 (two at formation, one replacement)", got)
	}
}

// seatNames lists the seats' nodes in order; never nil, so an empty plan
// compares equal to an empty want.
func seatNames(ss []seat) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.node)
	}
	return out
}
