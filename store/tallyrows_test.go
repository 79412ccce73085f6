package store

import (
	"bytes"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/edgequorum/edgequorum/zone"
)

// TestTallyRowsMatchTheStore: the matrix a tally reads through its cache of
// decoded rows is the matrix in the store, across reports, members leaving
// and coming back (a column dropped from rows whose checkers said nothing
// since), a member returning with a new server ID, verdicts and a restore.
// Every replica re-tallies what its leader decided: a stale row would make
// replicas disagree.
func TestTallyRowsMatchTheStore(t *testing.T) {
	s := newStore(t)
	a := newApplier(t, s)
	check := func(step string) {
		t.Helper()
		in, err := s.TallyInput()
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.Matrix()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in.Matrix, want) {
			t.Fatalf("%s: tally reads\n%v\nthe store holds\n%v", step, in.Matrix, want)
		}
	}
	nodes := []string{"a", "b", "c", "d", "e"}
	a.mustApply(members(nodes...))
	seq := map[string]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	sec := 1
	reportAll := func(from ...string) {
		var rs []zone.Report
		for _, f := range from {
			var res []zone.Result
			for _, p := range nodes {
				if p != f && rng.IntN(3) > 0 {
					if rng.IntN(2) == 0 {
						res = append(res, ok(p, float64(rng.IntN(100))))
					} else {
						res = append(res, fail(p))
					}
				}
			}
			seq[f]++
			rs = append(rs, report(f, seq[f], res...))
		}
		sec++
		a.mustApply(batch(sec, rs...))
	}
	reportAll(nodes...)
	check("first reports")
	for i := range 20 {
		reportAll(nodes[rng.IntN(len(nodes))])
		check("one member reported")
		if i%5 == 0 {
			reportAll(nodes...)
			check("everyone reported")
		}
	}

	// e leaves (its column goes from every row) and comes back before
	// anyone reports again: same member list as before, other rows changed.
	a.mustApply(members("a", "b", "c", "d"))
	a.mustApply(members(nodes...))
	check("e left and came back")
	reportAll("a")
	check("a reported after e came back")

	// d comes back with a new server ID: its row and seq start over.
	back := members(nodes...)
	for i := range back.Members {
		if back.Members[i].Node == "d" {
			back.Members[i].ServerID = "id-d-wiped"
		}
	}
	a.mustApply(back)
	seq["d"] = 0
	check("d wiped")
	reportAll("d", "a")
	check("d reported again")

	// A verdict batch re-tallies inside Apply through the same cache.
	if res := a.mustApply(a.decide(at(sec), nil)); res.Applied != 0 {
		t.Fatalf("empty verdict batch applied %d", res.Applied)
	}
	check("verdict batch")

	// Restore an earlier state over this one.
	earlier := snapshotBytes(t, s)
	reportAll(nodes...)
	check("after the snapshot")
	if err := s.Restore(io.NopCloser(bytes.NewReader(earlier))); err != nil {
		t.Fatal(err)
	}
	check("restored")
}
