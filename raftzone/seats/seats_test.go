package seats

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// TestClassifySeats covers the rules that turn what the leader knows into the
// planner's seats. It needs no network and no clock: time is an input.
func TestClassifySeats(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const voteTimeout, deadTimeout = 10 * time.Second, 30 * time.Second
	member := func(n string, joined time.Time) zone.Member {
		return zone.Member{Node: n, ServerID: "id-" + n, JoinedAt: joined}
	}
	cfg := func(voters []string, nonvoters ...string) map[string]raft.Server {
		out := map[string]raft.Server{}
		for _, n := range voters {
			out["id-"+n] = raft.Server{ID: raft.ServerID("id-" + n), Suffrage: raft.Voter}
		}
		for _, n := range nonvoters {
			out["id-"+n] = raft.Server{ID: raft.ServerID("id-" + n), Suffrage: raft.Nonvoter}
		}
		return out
	}
	reported := func(at time.Time, api bool) store.LastReport {
		return store.LastReport{ReceivedAt: at, APIReachable: api}
	}
	old := t0.Add(-time.Hour)

	for _, tc := range []struct {
		name     string
		in       Inputs
		since    map[string]time.Time // unhealthy-since carried from earlier rounds
		want     map[string]Seat      // by node; fields compared: voter, eligible, unhealthy, dead, api, self
		wantGone []string             // members without a Seat
	}{
		{
			name: "the leader is healthy and carries its own apiserver reach",
			in:   Inputs{Self: "a", SelfAPI: false, Members: []zone.Member{member("a", old)}, Config: cfg([]string{"a"})},
			want: map[string]Seat{"a": {Self: true, Voter: true}},
		},
		{
			name: "a fresh reporter is eligible with the reach it reported",
			in: Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a"}, "b"),
				LastReports: map[string]store.LastReport{"b": reported(t0.Add(-time.Second), true)}},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {Eligible: true, API: true}},
		},
		{
			name: "a newcomer that has not reported yet is eligible",
			in:   Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", t0.Add(-time.Second))}, Config: cfg([]string{"a"}, "b")},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {Eligible: true}},
		},
		{
			name: "a silent member that joined long ago is not",
			in:   Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a"}, "b")},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {}},
		},
		{
			name: "a stale reporter is not",
			in: Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a"}, "b"),
				LastReports: map[string]store.LastReport{"b": reported(t0.Add(-voteTimeout-time.Second), true)}},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {}},
		},
		{
			name: "a newcomer the zone judged unhealthy is not",
			in: Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", t0)}, Config: cfg([]string{"a"}, "b"),
				Verdicts: map[string]zone.Verdict{"b": {Node: "b", State: zone.Unhealthy}}},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {}},
		},
		{
			name: "a voter judged unhealthy is unhealthy though it reports",
			in: Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a", "b"}),
				LastReports: map[string]store.LastReport{"b": reported(t0, true)},
				Verdicts:    map[string]zone.Verdict{"b": {Node: "b", State: zone.Unhealthy}}},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {Voter: true, Unhealthy: true, API: true}},
		},
		{
			name: "a silent voter is unhealthy, not yet dead",
			in:   Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a", "b"})},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {Voter: true, Unhealthy: true}},
		},
		{
			name:  "a voter unhealthy for the dead-voter timeout is dead",
			in:    Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", old)}, Config: cfg([]string{"a", "b"})},
			since: map[string]time.Time{"id-b": t0.Add(-deadTimeout)},
			want:  map[string]Seat{"a": {Self: true, Voter: true}, "b": {Voter: true, Unhealthy: true, Dead: true}},
		},
		{
			name: "a member outside the configuration is a spare, eligible like a nonvoter",
			in: Inputs{Self: "a", Members: []zone.Member{member("a", old), member("b", t0), member("c", old), member("d", old)},
				Config: cfg([]string{"a"}), LastReports: map[string]store.LastReport{"c": reported(t0, true)}},
			want: map[string]Seat{"a": {Self: true, Voter: true}, "b": {Spare: true, Eligible: true},
				"c": {Spare: true, Eligible: true, API: true}, "d": {Spare: true}},
		},
		{
			name:     "a server that is no member has no Seat",
			in:       Inputs{Self: "a", Members: []zone.Member{member("a", old)}, Config: cfg([]string{"a"}, "b")},
			want:     map[string]Seat{"a": {Self: true, Voter: true}},
			wantGone: []string{"b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now, tc.in.VoteTimeout, tc.in.DeadVoterTimeout = t0, voteTimeout, deadTimeout
			p := NewPromoter()
			for id, at := range tc.since {
				p.unhealthySince[id] = at
			}
			got := map[string]Seat{}
			for _, s := range p.Classify(tc.in) {
				got[s.Node] = s
			}
			for _, n := range tc.wantGone {
				if _, ok := got[n]; ok {
					t.Errorf("%s has a Seat", n)
				}
			}
			for n, w := range tc.want {
				g, ok := got[n]
				if !ok {
					t.Errorf("%s has no Seat", n)
					continue
				}
				g.ID, g.Node, g.JoinedAt = "", "", time.Time{}
				if g != w {
					t.Errorf("%s: got %+v, want %+v", n, g, w)
				}
			}
		})
	}
}

// TestClassifyRemembersUnhealthySince checks the dead-voter clock across rounds:
// it starts at the first unhealthy round, runs out after the timeout, and
// resets when the voter reports again.
func TestClassifyRemembersUnhealthySince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := Inputs{Self: "a", VoteTimeout: 10 * time.Second, DeadVoterTimeout: 30 * time.Second,
		Members: []zone.Member{{Node: "a", ServerID: "A"}, {Node: "b", ServerID: "B"}},
		Config:  map[string]raft.Server{"A": {ID: "A", Suffrage: raft.Voter}, "B": {ID: "B", Suffrage: raft.Voter}}}
	p := NewPromoter()
	seatOf := func(at time.Time, last map[string]store.LastReport) Seat {
		in.Now, in.LastReports = at, last
		for _, s := range p.Classify(in) {
			if s.Node == "b" {
				return s
			}
		}
		t.Fatal("b has no Seat")
		return Seat{}
	}
	if s := seatOf(t0, nil); !s.Unhealthy || s.Dead {
		t.Fatalf("first silent round: unhealthy=%v dead=%v, want unhealthy, not dead", s.Unhealthy, s.Dead)
	}
	if s := seatOf(t0.Add(29*time.Second), nil); s.Dead {
		t.Fatal("dead before the timeout")
	}
	if s := seatOf(t0.Add(30*time.Second), nil); !s.Dead {
		t.Fatal("not dead at the timeout")
	}
	back := t0.Add(31 * time.Second)
	if s := seatOf(back, map[string]store.LastReport{"b": {ReceivedAt: back}}); s.Unhealthy {
		t.Fatal("still unhealthy after reporting")
	}
	if s := seatOf(back.Add(time.Second), nil); !s.Unhealthy || s.Dead {
		t.Fatalf("silent again: unhealthy=%v dead=%v, want the clock restarted", s.Unhealthy, s.Dead)
	}
}

// TestPlanStandbys covers who becomes a stand-by and who goes back to being a
// Spare: a healthy stand-by keeps its Seat, a dead one gives it up only to a
// healthy spare, and spares are chosen by apiserver reach, then seniority.
func TestPlanStandbys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seatOf := func(n string, joined int, mods ...func(*Seat)) Seat {
		s := Seat{ID: n, Node: n, Eligible: true, API: true, JoinedAt: t0.Add(time.Duration(joined) * time.Second)}
		for _, m := range mods {
			m(&s)
		}
		return s
	}
	voter := func(s *Seat) { s.Voter = true }
	leader := func(s *Seat) { s.Voter, s.Self = true, true }
	spare := func(s *Seat) { s.Spare = true }
	sick := func(s *Seat) { s.Eligible = false }
	noAPI := func(s *Seat) { s.API = false }
	for _, tc := range []struct {
		name        string
		seats       []Seat
		want        int
		add, remove []string
	}{
		{name: "fills the seats with the senior spares", want: 2,
			seats: []Seat{seatOf("a", 0, leader), seatOf("b", 0, voter), seatOf("e", 3, spare), seatOf("c", 1, spare), seatOf("d", 2, spare)},
			add:   []string{"c", "d"}, remove: []string{}},
		{name: "apiserver reach before seniority", want: 1,
			seats: []Seat{seatOf("a", 0, leader), seatOf("c", 1, spare, noAPI), seatOf("d", 2, spare)},
			add:   []string{"d"}, remove: []string{}},
		{name: "a healthy stand-by keeps its Seat against a senior spare", want: 1,
			seats: []Seat{seatOf("a", 0, leader), seatOf("d", 5), seatOf("c", 1, spare)},
			add:   []string{}, remove: []string{}},
		{name: "a sick stand-by yields to a healthy spare", want: 2,
			seats: []Seat{seatOf("a", 0, leader), seatOf("b", 1, sick), seatOf("c", 2), seatOf("d", 3, spare)},
			add:   []string{"d"}, remove: []string{"b"}},
		{name: "a sick stand-by stays when no spare is healthy", want: 2,
			seats: []Seat{seatOf("a", 0, leader), seatOf("b", 1, sick), seatOf("c", 2), seatOf("d", 3, spare, sick)},
			add:   []string{}, remove: []string{}},
		{name: "surplus stand-bys go back to spare, the best one stays", want: 1,
			seats: []Seat{seatOf("a", 0, leader), seatOf("b", 1, noAPI), seatOf("c", 2), seatOf("d", 3)},
			add:   []string{}, remove: []string{"d", "b"}},
		{name: "no seats: every stand-by leaves", want: 0,
			seats: []Seat{seatOf("a", 0, leader), seatOf("b", 1)},
			add:   []string{}, remove: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add, remove := PlanStandbys(tc.seats, tc.want)
			if got := seatNames(add); !slices.Equal(got, tc.add) {
				t.Errorf("add %v, want %v", got, tc.add)
			}
			if got := seatNames(remove); !slices.Equal(got, tc.remove) {
				t.Errorf("remove %v, want %v", got, tc.remove)
			}
		})
	}
}

// TestDesiredStandbys checks the Seat count: --standbys plus the voters still
// lacking, never more than the members that do not vote.
func TestDesiredStandbys(t *testing.T) {
	for _, tc := range []struct{ members, voters, limit, standbys, want int }{
		{1, 1, 5, 2, 0},
		{3, 1, 5, 2, 2},   // forming: both others, to become voters
		{9, 1, 5, 2, 6},   // forming: four future voters and two stand-bys
		{9, 5, 5, 2, 2},   // formed
		{129, 5, 5, 2, 2}, // a large zone keeps its core small
		{129, 4, 5, 2, 3}, // a voter lost: one more Seat until it is replaced
		{7, 5, 5, 0, 0},   // --standbys 0
		{6, 5, 5, 2, 1},   // only one member does not vote
	} {
		if got := DesiredStandbys(tc.members, tc.voters, tc.limit, tc.standbys); got != tc.want {
			t.Errorf("DesiredStandbys(%d members, %d voters, --voters %d, --standbys %d) = %d, want %d",
				tc.members, tc.voters, tc.limit, tc.standbys, got, tc.want)
		}
	}
}

func TestPlanVoters(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	voter := func(n string) Seat { return Seat{ID: n, Node: n, Voter: true, API: true, JoinedAt: t0} }
	spare := func(n string, joined int) Seat {
		return Seat{ID: n, Node: n, Eligible: true, API: true, JoinedAt: t0.Add(time.Duration(joined) * time.Second)}
	}
	self := func(s Seat) Seat { s.Self = true; return s }
	noAPI := func(s Seat) Seat { s.API = false; return s }
	sick := func(s Seat) Seat { s.Unhealthy = true; return s }
	dead := func(s Seat) Seat { s.Unhealthy, s.Dead = true, true; return s }
	ineligible := func(s Seat) Seat { s.Eligible = false; return s }
	outside := func(s Seat) Seat { s.Spare = true; return s }
	for _, tc := range []struct {
		name    string
		seats   []Seat
		want    int
		fails   []string // candidates that fail the live check
		promote []string
		demote  []string
		short   bool
		checked []string // live checks made, in order
	}{
		{name: "one member", seats: []Seat{self(voter("a"))}, want: 1,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "a zone of two makes both voters", seats: []Seat{self(voter("a")), spare("b", 1)}, want: 2,
			promote: []string{"b"}, demote: []string{}, checked: []string{"b"}},
		{name: "grows 1 to 3 in a pair", seats: []Seat{self(voter("a")), spare("b", 1), spare("c", 2)}, want: 3,
			promote: []string{"b", "c"}, demote: []string{}, checked: []string{"b", "c"}},
		{name: "no pair below the target", seats: []Seat{self(voter("a")), spare("b", 1), spare("c", 2), spare("d", 3), spare("e", 4)}, want: 5,
			fails: []string{"c", "d", "e"}, promote: []string{}, demote: []string{}, short: true, checked: []string{"b", "c", "d", "e"}},
		{name: "odd count stays odd below the target", seats: []Seat{self(voter("a")), voter("b"), voter("c"), spare("d", 3), spare("e", 4)}, want: 5,
			fails: []string{"e"}, promote: []string{}, demote: []string{}, short: true, checked: []string{"d", "e"}},
		{name: "even zone makes everyone a voter", seats: []Seat{self(voter("a")), voter("b"), voter("c"), spare("d", 3)}, want: 4,
			promote: []string{"d"}, demote: []string{}, checked: []string{"d"}},
		{name: "apiserver reach first, then seniority", seats: []Seat{self(voter("a")), noAPI(spare("b", 1)), spare("d", 3), spare("c", 2)}, want: 3,
			promote: []string{"c", "d"}, demote: []string{}, checked: []string{"c", "d"}},
		{name: "failed check falls to the next", seats: []Seat{self(voter("a")), spare("b", 1), spare("c", 2), spare("d", 3)}, want: 3,
			fails: []string{"b"}, promote: []string{"c", "d"}, demote: []string{}, checked: []string{"b", "c", "d"}},
		{name: "ineligible never checked", seats: []Seat{self(voter("a")), ineligible(spare("b", 1)), spare("c", 2)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{"c"}},
		{name: "at target: no calls", seats: []Seat{self(voter("a")), voter("b"), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "sick voter is not replaced before it is dead", seats: []Seat{self(voter("a")), sick(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{}, demote: []string{}, checked: []string{}},
		{name: "dead voter replaced, then demoted", seats: []Seat{self(voter("a")), dead(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			promote: []string{"d"}, demote: []string{"b"}, checked: []string{"d"}},
		{name: "dead voter kept when no candidate passes", seats: []Seat{self(voter("a")), dead(voter("b")), voter("c"), spare("d", 1)}, want: 3,
			fails: []string{"d"}, promote: []string{}, demote: []string{}, checked: []string{"d"}},
		{name: "a spare is no candidate, though eligible", seats: []Seat{self(voter("a")), outside(spare("b", 1)), spare("c", 2), spare("d", 3)}, want: 3,
			promote: []string{"c", "d"}, demote: []string{}, checked: []string{"c", "d"}},
		{name: "excess demoted worst first, never the leader", seats: []Seat{self(noAPI(voter("a"))), voter("b"), noAPI(voter("c")), sick(voter("d")), voter("e")}, want: 3,
			promote: []string{}, demote: []string{"d", "c"}, checked: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checked := []string{}
			plan := PlanVoters(tc.seats, tc.want, func(s Seat) bool {
				checked = append(checked, s.Node)
				return !slices.Contains(tc.fails, s.Node)
			})
			if got := seatNames(plan.Promote); !slices.Equal(got, tc.promote) {
				t.Errorf("promote %v, want %v", got, tc.promote)
			}
			if got := seatNames(plan.Demote); !slices.Equal(got, tc.demote) {
				t.Errorf("demote %v, want %v", got, tc.demote)
			}
			if plan.Short != tc.short {
				t.Errorf("short %v, want %v", plan.Short, tc.short)
			}
			if !slices.Equal(checked, tc.checked) {
				t.Errorf("live checks %v, want %v", checked, tc.checked)
			}
		})
	}
}

// seatNames lists the seats' nodes in order; never nil, so an empty plan
// compares equal to an empty want.
func seatNames(ss []Seat) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Node)
	}
	return out
}
