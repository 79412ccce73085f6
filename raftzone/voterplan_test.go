package raftzone

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
		in       voterInputs
		since    map[string]time.Time // unhealthy-since carried from earlier rounds
		want     map[string]seat      // by node; fields compared: voter, eligible, unhealthy, dead, api, self
		wantGone []string             // members without a seat
	}{
		{
			name: "the leader is healthy and carries its own apiserver reach",
			in:   voterInputs{self: "a", selfAPI: false, members: []zone.Member{member("a", old)}, config: cfg([]string{"a"})},
			want: map[string]seat{"a": {self: true, voter: true}},
		},
		{
			name: "a fresh reporter is eligible with the reach it reported",
			in: voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a"}, "b"),
				lastReports: map[string]store.LastReport{"b": reported(t0.Add(-time.Second), true)}},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {eligible: true, api: true}},
		},
		{
			name: "a newcomer that has not reported yet is eligible",
			in:   voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", t0.Add(-time.Second))}, config: cfg([]string{"a"}, "b")},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {eligible: true}},
		},
		{
			name: "a silent member that joined long ago is not",
			in:   voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a"}, "b")},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {}},
		},
		{
			name: "a stale reporter is not",
			in: voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a"}, "b"),
				lastReports: map[string]store.LastReport{"b": reported(t0.Add(-voteTimeout-time.Second), true)}},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {}},
		},
		{
			name: "a newcomer the zone judged unhealthy is not",
			in: voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", t0)}, config: cfg([]string{"a"}, "b"),
				verdicts: map[string]zone.Verdict{"b": {Node: "b", State: zone.Unhealthy}}},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {}},
		},
		{
			name: "a voter judged unhealthy is unhealthy though it reports",
			in: voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a", "b"}),
				lastReports: map[string]store.LastReport{"b": reported(t0, true)},
				verdicts:    map[string]zone.Verdict{"b": {Node: "b", State: zone.Unhealthy}}},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {voter: true, unhealthy: true, api: true}},
		},
		{
			name: "a silent voter is unhealthy, not yet dead",
			in:   voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a", "b"})},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {voter: true, unhealthy: true}},
		},
		{
			name:  "a voter unhealthy for the dead-voter timeout is dead",
			in:    voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", old)}, config: cfg([]string{"a", "b"})},
			since: map[string]time.Time{"id-b": t0.Add(-deadTimeout)},
			want:  map[string]seat{"a": {self: true, voter: true}, "b": {voter: true, unhealthy: true, dead: true}},
		},
		{
			name: "a member outside the configuration is a spare, eligible like a nonvoter",
			in: voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", t0), member("c", old), member("d", old)},
				config: cfg([]string{"a"}), lastReports: map[string]store.LastReport{"c": reported(t0, true)}},
			want: map[string]seat{"a": {self: true, voter: true}, "b": {spare: true, eligible: true},
				"c": {spare: true, eligible: true, api: true}, "d": {spare: true}},
		},
		{
			name:     "a server that is no member has no seat",
			in:       voterInputs{self: "a", members: []zone.Member{member("a", old)}, config: cfg([]string{"a"}, "b")},
			want:     map[string]seat{"a": {self: true, voter: true}},
			wantGone: []string{"b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.now, tc.in.voteTimeout, tc.in.deadVoterTimeout = t0, voteTimeout, deadTimeout
			p := newPromoter()
			for id, at := range tc.since {
				p.unhealthySince[id] = at
			}
			got := map[string]seat{}
			for _, s := range p.classify(tc.in) {
				got[s.node] = s
			}
			for _, n := range tc.wantGone {
				if _, ok := got[n]; ok {
					t.Errorf("%s has a seat", n)
				}
			}
			for n, w := range tc.want {
				g, ok := got[n]
				if !ok {
					t.Errorf("%s has no seat", n)
					continue
				}
				g.id, g.node, g.joinedAt = "", "", time.Time{}
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
	in := voterInputs{self: "a", voteTimeout: 10 * time.Second, deadVoterTimeout: 30 * time.Second,
		members: []zone.Member{{Node: "a", ServerID: "A"}, {Node: "b", ServerID: "B"}},
		config:  map[string]raft.Server{"A": {ID: "A", Suffrage: raft.Voter}, "B": {ID: "B", Suffrage: raft.Voter}}}
	p := newPromoter()
	seatOf := func(at time.Time, last map[string]store.LastReport) seat {
		in.now, in.lastReports = at, last
		for _, s := range p.classify(in) {
			if s.node == "b" {
				return s
			}
		}
		t.Fatal("b has no seat")
		return seat{}
	}
	if s := seatOf(t0, nil); !s.unhealthy || s.dead {
		t.Fatalf("first silent round: unhealthy=%v dead=%v, want unhealthy, not dead", s.unhealthy, s.dead)
	}
	if s := seatOf(t0.Add(29*time.Second), nil); s.dead {
		t.Fatal("dead before the timeout")
	}
	if s := seatOf(t0.Add(30*time.Second), nil); !s.dead {
		t.Fatal("not dead at the timeout")
	}
	back := t0.Add(31 * time.Second)
	if s := seatOf(back, map[string]store.LastReport{"b": {ReceivedAt: back}}); s.unhealthy {
		t.Fatal("still unhealthy after reporting")
	}
	if s := seatOf(back.Add(time.Second), nil); !s.unhealthy || s.dead {
		t.Fatalf("silent again: unhealthy=%v dead=%v, want the clock restarted", s.unhealthy, s.dead)
	}
}

// TestPlanStandbys covers who becomes a stand-by and who goes back to being a
// spare: a healthy stand-by keeps its seat, a dead one gives it up only to a
// healthy spare, and spares are chosen by apiserver reach, then seniority.
func TestPlanStandbys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seatOf := func(n string, joined int, mods ...func(*seat)) seat {
		s := seat{id: n, node: n, eligible: true, api: true, joinedAt: t0.Add(time.Duration(joined) * time.Second)}
		for _, m := range mods {
			m(&s)
		}
		return s
	}
	voter := func(s *seat) { s.voter = true }
	leader := func(s *seat) { s.voter, s.self = true, true }
	spare := func(s *seat) { s.spare = true }
	sick := func(s *seat) { s.eligible = false }
	noAPI := func(s *seat) { s.api = false }
	for _, tc := range []struct {
		name        string
		seats       []seat
		want        int
		add, remove []string
	}{
		{name: "fills the seats with the senior spares", want: 2,
			seats: []seat{seatOf("a", 0, leader), seatOf("b", 0, voter), seatOf("e", 3, spare), seatOf("c", 1, spare), seatOf("d", 2, spare)},
			add:   []string{"c", "d"}, remove: []string{}},
		{name: "apiserver reach before seniority", want: 1,
			seats: []seat{seatOf("a", 0, leader), seatOf("c", 1, spare, noAPI), seatOf("d", 2, spare)},
			add:   []string{"d"}, remove: []string{}},
		{name: "a healthy stand-by keeps its seat against a senior spare", want: 1,
			seats: []seat{seatOf("a", 0, leader), seatOf("d", 5), seatOf("c", 1, spare)},
			add:   []string{}, remove: []string{}},
		{name: "a sick stand-by yields to a healthy spare", want: 2,
			seats: []seat{seatOf("a", 0, leader), seatOf("b", 1, sick), seatOf("c", 2), seatOf("d", 3, spare)},
			add:   []string{"d"}, remove: []string{"b"}},
		{name: "a sick stand-by stays when no spare is healthy", want: 2,
			seats: []seat{seatOf("a", 0, leader), seatOf("b", 1, sick), seatOf("c", 2), seatOf("d", 3, spare, sick)},
			add:   []string{}, remove: []string{}},
		{name: "surplus stand-bys go back to spare, the best one stays", want: 1,
			seats: []seat{seatOf("a", 0, leader), seatOf("b", 1, noAPI), seatOf("c", 2), seatOf("d", 3)},
			add:   []string{}, remove: []string{"d", "b"}},
		{name: "no seats: every stand-by leaves", want: 0,
			seats: []seat{seatOf("a", 0, leader), seatOf("b", 1)},
			add:   []string{}, remove: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add, remove := planStandbys(tc.seats, tc.want)
			if got := seatNames(add); !slices.Equal(got, tc.add) {
				t.Errorf("add %v, want %v", got, tc.add)
			}
			if got := seatNames(remove); !slices.Equal(got, tc.remove) {
				t.Errorf("remove %v, want %v", got, tc.remove)
			}
		})
	}
}

// TestDesiredStandbys checks the seat count: --standbys plus the voters still
// lacking, never more than the members that do not vote.
func TestDesiredStandbys(t *testing.T) {
	for _, tc := range []struct{ members, voters, limit, standbys, want int }{
		{1, 1, 5, 2, 0},
		{3, 1, 5, 2, 2},   // forming: both others, to become voters
		{9, 1, 5, 2, 6},   // forming: four future voters and two stand-bys
		{9, 5, 5, 2, 2},   // formed
		{129, 5, 5, 2, 2}, // a large zone keeps its core small
		{129, 4, 5, 2, 3}, // a voter lost: one more seat until it is replaced
		{7, 5, 5, 0, 0},   // --standbys 0
		{6, 5, 5, 2, 1},   // only one member does not vote
	} {
		if got := desiredStandbys(tc.members, tc.voters, tc.limit, tc.standbys); got != tc.want {
			t.Errorf("desiredStandbys(%d members, %d voters, --voters %d, --standbys %d) = %d, want %d",
				tc.members, tc.voters, tc.limit, tc.standbys, got, tc.want)
		}
	}
}
