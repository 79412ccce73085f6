package raftzone

import (
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
			name:     "a member outside the configuration has no seat",
			in:       voterInputs{self: "a", members: []zone.Member{member("a", old), member("b", t0)}, config: cfg([]string{"a"})},
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
				if g.self != w.self || g.voter != w.voter || g.eligible != w.eligible || g.unhealthy != w.unhealthy || g.dead != w.dead || g.api != w.api {
					t.Errorf("%s: got self=%v voter=%v eligible=%v unhealthy=%v dead=%v api=%v, want self=%v voter=%v eligible=%v unhealthy=%v dead=%v api=%v",
						n, g.self, g.voter, g.eligible, g.unhealthy, g.dead, g.api, w.self, w.voter, w.eligible, w.unhealthy, w.dead, w.api)
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
