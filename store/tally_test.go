package store

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

func tallyMembers(names ...string) []zone.Member {
	var out []zone.Member
	for _, n := range names {
		out = append(out, zone.Member{Node: n})
	}
	return out
}

func TestTally(t *testing.T) {
	now := time.Unix(1000, 0)
	fresh, stale := now.Add(-time.Second), now.Add(-time.Minute)
	const timeout = 10 * time.Second
	type opinion struct {
		from, about string
		ok          bool
	}
	tests := []struct {
		name     string
		members  []zone.Member
		reported map[string]time.Time // sender → last report
		opinions []opinion
		want     map[string]zone.State
		wantPC   map[string][2]int
	}{
		{
			name: "one member has no verdicts", members: tallyMembers("a"),
			reported: map[string]time.Time{"a": fresh},
			want:     map[string]zone.State{},
		},
		{
			name: "three members all ok", members: tallyMembers("a", "b", "c"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh},
			opinions: []opinion{{"a", "b", true}, {"a", "c", true}, {"b", "a", true}, {"b", "c", true}, {"c", "a", true}, {"c", "b", true}},
			want:     map[string]zone.State{"a": zone.Healthy, "b": zone.Healthy, "c": zone.Healthy},
			wantPC:   map[string][2]int{"a": {2, 0}},
		},
		{
			name: "dead node judged by the other two", members: tallyMembers("a", "b", "c"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": stale},
			opinions: []opinion{{"a", "c", false}, {"b", "c", false}, {"c", "a", true}, {"c", "b", true}, {"a", "b", true}, {"b", "a", true}},
			// c's stale opinions do not count: a and b have one pro each,
			// below q=2, so they stay unknown.
			want:   map[string]zone.State{"a": zone.Unknown, "b": zone.Unknown, "c": zone.Unhealthy},
			wantPC: map[string][2]int{"c": {0, 2}, "a": {1, 0}},
		},
		{
			name: "a node never votes for itself", members: tallyMembers("a", "b", "c"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh},
			opinions: []opinion{{"a", "a", true}, {"b", "a", true}},
			want:     map[string]zone.State{"a": zone.Unknown},
			wantPC:   map[string][2]int{"a": {1, 0}},
		},
		{
			name: "four members: q=2, one pro one con is unknown", members: tallyMembers("a", "b", "c", "d"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh},
			opinions: []opinion{{"a", "d", true}, {"b", "d", false}},
			want:     map[string]zone.State{"d": zone.Unknown},
			wantPC:   map[string][2]int{"d": {1, 1}},
		},
		{
			name: "four members: two cons reach q", members: tallyMembers("a", "b", "c", "d"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh},
			opinions: []opinion{{"a", "d", false}, {"b", "d", false}, {"c", "d", true}},
			want:     map[string]zone.State{"d": zone.Unhealthy},
			wantPC:   map[string][2]int{"d": {1, 2}},
		},
		{
			name: "five members: two cons are not a quorum", members: tallyMembers("a", "b", "c", "d", "e"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh, "d": fresh, "e": fresh},
			opinions: []opinion{{"a", "e", false}, {"b", "e", false}},
			want:     map[string]zone.State{"e": zone.Unknown},
		},
		{
			name: "report from the far future is not fresh", members: tallyMembers("a", "b", "c"),
			reported: map[string]time.Time{"a": now.Add(time.Hour), "b": fresh},
			opinions: []opinion{{"a", "c", true}, {"b", "c", true}},
			want:     map[string]zone.State{"c": zone.Unknown},
			wantPC:   map[string][2]int{"c": {1, 0}},
		},
		{
			name: "opinion about a non-member is ignored", members: tallyMembers("a", "b", "c"),
			reported: map[string]time.Time{"a": fresh, "b": fresh, "c": fresh},
			opinions: []opinion{{"a", "x", false}, {"b", "x", false}},
			want:     map[string]zone.State{"a": zone.Unknown},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			last := map[string]LastReport{}
			for n, at := range tc.reported {
				last[n] = LastReport{ReceivedAt: at}
			}
			matrix := Matrix{}
			for _, o := range tc.opinions {
				if matrix[o.from] == nil {
					matrix[o.from] = map[string]Cell{}
				}
				matrix[o.from][o.about] = Cell{OK: o.ok}
			}
			got := Tally(tc.members, last, matrix, now, timeout)
			if len(tc.members) <= 1 && len(got) != 0 {
				t.Fatalf("verdicts for a one-member zone: %v", got)
			}
			for node, st := range tc.want {
				if got[node].State != st {
					t.Errorf("%s = %s, want %s", node, got[node].State, st)
				}
				if got[node].Members != len(tc.members) {
					t.Errorf("%s counted %d members", node, got[node].Members)
				}
			}
			for node, pc := range tc.wantPC {
				if got[node].Pros != pc[0] || got[node].Cons != pc[1] {
					t.Errorf("%s pros/cons %d/%d, want %d/%d", node, got[node].Pros, got[node].Cons, pc[0], pc[1])
				}
			}
			if _, ok := got["x"]; ok {
				t.Error("verdict for a non-member")
			}
		})
	}
}

// tallyByRule is the verdict rule written as DESIGN states it, one (checker,
// checked) pair at a time: the reference the faster Tally must agree with.
func tallyByRule(members []zone.Member, last map[string]LastReport, matrix Matrix, now time.Time, voteTimeout time.Duration) map[string]zone.Verdict {
	m := len(members)
	if m <= 1 {
		return nil
	}
	q := zone.Quorum(m)
	out := make(map[string]zone.Verdict, m)
	for _, x := range members {
		v := zone.Verdict{Node: x.Node, State: zone.Unknown, Members: m}
		for _, c := range members {
			lr, ok := last[c.Node]
			age := now.Sub(lr.ReceivedAt)
			if c.Node == x.Node || !ok || age > voteTimeout || age < -voteTimeout {
				continue
			}
			if cell, ok := matrix[c.Node][x.Node]; ok {
				if cell.OK {
					v.Pros++
				} else {
					v.Cons++
				}
			}
		}
		switch {
		case v.Pros >= q:
			v.State = zone.Healthy
		case v.Cons >= q:
			v.State = zone.Unhealthy
		}
		out[x.Node] = v
	}
	return out
}

// TestTallyFollowsTheRule compares Tally with the rule on random zones: stale,
// missing and future reports, self-opinions, rows of non-members and opinions
// about them, sparse and dense rows.
func TestTallyFollowsTheRule(t *testing.T) {
	const timeout = 10 * time.Second
	now := time.Unix(1_700_000_000, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	ages := []time.Duration{0, time.Second, timeout, timeout + 1, -timeout, -timeout - 1, time.Hour}
	for round := range 500 {
		n := rng.IntN(12)
		names := make([]string, n+3) // the last three are never members
		for i := range names {
			names[i] = fmt.Sprintf("n%d", i)
		}
		mem := tallyMembers(names[:n]...)
		last := map[string]LastReport{}
		matrix := Matrix{}
		density := rng.Float64()
		for _, c := range names {
			if rng.IntN(5) > 0 {
				last[c] = LastReport{ReceivedAt: now.Add(-ages[rng.IntN(len(ages))])}
			}
			for _, x := range names {
				if rng.Float64() < density {
					if matrix[c] == nil {
						matrix[c] = map[string]Cell{}
					}
					matrix[c][x] = Cell{OK: rng.IntN(2) == 0}
				}
			}
		}
		got, want := Tally(mem, last, matrix, now, timeout), tallyByRule(mem, last, matrix, now, timeout)
		if !maps.Equal(got, want) {
			t.Fatalf("round %d, %d members:\n got  %v\n want %v", round, n, got, want)
		}
	}
}
