package baseline

import (
	"testing"
	"time"
)

func TestThreshold(t *testing.T) {
	for checked, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 9: 5, 128: 64, 129: 65} {
		if got := Threshold(checked); got != want {
			t.Errorf("Threshold(%d) = %d, want %d", checked, got, want)
		}
	}
}

func TestTally(t *testing.T) {
	now := time.Unix(1000, 0)
	fresh, stale := now.Add(-5*time.Second), now.Add(-61*time.Second)
	edge := now.Add(-60 * time.Second) // exactly the timeout old: still counts
	ok := func(at time.Time) Detail { return Detail{Normal: true, Time: at} }
	bad := func(at time.Time) Detail { return Detail{Normal: false, Time: at} }
	count := func(list []string) map[string]int {
		m := map[string]int{}
		for _, ip := range list {
			m[ip]++
		}
		return m
	}
	tests := []struct {
		name     string
		rows     map[string]Row
		checked  int
		votes    map[string]Votes
		pros     map[string]int // IP → times listed
		cons     map[string]int
		unlisted []string
	}{{
		name: "three healthy nodes, self votes included",
		rows: map[string]Row{
			"a": {"a": ok(fresh), "b": ok(fresh), "c": ok(fresh)},
			"b": {"a": ok(fresh), "b": ok(fresh), "c": ok(fresh)},
			"c": {"a": ok(fresh), "b": ok(fresh), "c": ok(fresh)},
		},
		checked: 3,
		votes:   map[string]Votes{"a": {Pros: 3}, "b": {Pros: 3}, "c": {Pros: 3}},
		// Threshold 2: the second and third vote each list the IP again.
		pros: map[string]int{"a": 2, "b": 2, "c": 2},
	}, {
		name: "dead node: its own stale-but-valid row votes for itself",
		rows: map[string]Row{
			"a": {"a": ok(fresh), "b": ok(fresh), "c": bad(fresh)},
			"b": {"a": ok(fresh), "b": ok(fresh), "c": bad(fresh)},
			"c": {"a": ok(fresh), "b": ok(fresh), "c": ok(fresh)},
		},
		checked: 3,
		votes:   map[string]Votes{"a": {Pros: 3}, "b": {Pros: 3}, "c": {Pros: 1, Cons: 2}},
		pros:    map[string]int{"a": 2, "b": 2},
		cons:    map[string]int{"c": 1},
	}, {
		name: "expired votes do not count; the timeout itself still does",
		rows: map[string]Row{
			"a": {"c": bad(fresh)},
			"b": {"c": bad(stale)},
			"d": {"c": bad(edge)},
		},
		checked: 4,
		votes:   map[string]Votes{"c": {Cons: 2}},
		cons:    map[string]int{"c": 1},
	}, {
		name: "split vote in an even zone lists the node both ways",
		rows: map[string]Row{
			"a": {"x": ok(fresh)}, "b": {"x": ok(fresh)},
			"c": {"x": bad(fresh)}, "d": {"x": bad(fresh)},
		},
		checked: 4, // threshold 2 with ≥
		votes:   map[string]Votes{"x": {Pros: 2, Cons: 2}},
		pros:    map[string]int{"x": 1},
		cons:    map[string]int{"x": 1},
	}, {
		name: "below threshold: no decision",
		rows: map[string]Row{
			"a": {"x": bad(fresh)}, "b": {"x": bad(fresh)}, "c": {"x": ok(fresh)},
		},
		checked:  5, // threshold 3
		votes:    map[string]Votes{"x": {Pros: 1, Cons: 2}},
		unlisted: []string{"x"},
	}, {
		name:    "no rows",
		rows:    map[string]Row{},
		checked: 3,
		votes:   map[string]Votes{},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			votes, pros, cons := Tally(tc.rows, tc.checked, now, 60*time.Second)
			if len(votes) != len(tc.votes) {
				t.Errorf("votes = %v, want %v", votes, tc.votes)
			}
			for ip, want := range tc.votes {
				if votes[ip] != want {
					t.Errorf("votes[%s] = %+v, want %+v", ip, votes[ip], want)
				}
			}
			gotPros, gotCons := count(pros), count(cons)
			for _, c := range []struct {
				what      string
				got, want map[string]int
			}{{"pros", gotPros, tc.pros}, {"cons", gotCons, tc.cons}} {
				if len(c.got) != len(c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
					continue
				}
				for ip, n := range c.want {
					if c.got[ip] != n {
						t.Errorf("%s lists %s %d times, want %d", c.what, ip, c.got[ip], n)
					}
				}
			}
			for _, ip := range tc.unlisted {
				if gotPros[ip]+gotCons[ip] != 0 {
					t.Errorf("%s listed without a majority", ip)
				}
			}
		})
	}
}

func TestSignCoversSourceAndDetail(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	base := CommunInfo{SourceIP: "127.0.0.2", CheckDetail: Row{"127.0.0.3": {Normal: true, Time: at}}}
	key := []byte("k")
	sig, err := Sign(base, key)
	if err != nil {
		t.Fatal(err)
	}
	for name, info := range map[string]CommunInfo{
		"source": {SourceIP: "127.0.0.4", CheckDetail: base.CheckDetail},
		"normal": {SourceIP: base.SourceIP, CheckDetail: Row{"127.0.0.3": {Normal: false, Time: at}}},
		"time":   {SourceIP: base.SourceIP, CheckDetail: Row{"127.0.0.3": {Normal: true, Time: at.Add(1)}}},
	} {
		if other, _ := Sign(info, key); other == sig {
			t.Errorf("changing %s keeps the HMAC", name)
		}
	}
	if other, _ := Sign(base, []byte("other")); other == sig {
		t.Error("HMAC does not depend on the key")
	}
}
