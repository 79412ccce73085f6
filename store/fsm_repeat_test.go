package store

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/edgequorum/edgequorum/zone"
)

// TestAResultRepeatedUnchangedKeepsItsCell: a member's periodic full report
// repeats results that did not change; each cell keeps the time it last
// changed, and a changed result still moves it.
func TestAResultRepeatedUnchangedKeepsItsCell(t *testing.T) {
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c"))
	a.mustApply(batch(1, report("a", 1, ok("b", 100), fail("c"))))
	a.mustApply(batch(9, report("a", 2, ok("b", 100), fail("c"))))
	row, err := s.MatrixRow("a")
	if err != nil {
		t.Fatal(err)
	}
	if !row["b"].At.Equal(at(1)) || !row["c"].At.Equal(at(1)) {
		t.Errorf("cells after an unchanged repeat: b at %v, c at %v; want both at %v", row["b"].At, row["c"].At, at(1))
	}
	a.mustApply(batch(12, report("a", 3, ok("b", 100), ok("c", 100))))
	if row, _ = s.MatrixRow("a"); !row["c"].At.Equal(at(12)) || !row["c"].OK || !row["b"].At.Equal(at(1)) {
		t.Errorf("after c changed: %+v", row)
	}
}

// TestRowGapsNameWhatAReplicaLacks: a result about a peer that is not a
// member when its report applies is dropped; once the peer is a member, the
// row's gap names it until a report fills it, and again after the peer left
// and came back (its column went with it).
func TestRowGapsNameWhatAReplicaLacks(t *testing.T) {
	s := newStore(t)
	a := newApplier(t, s)
	gaps := func(checker string) string {
		t.Helper()
		g, err := s.RowGaps(checker)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(g)
	}
	a.mustApply(members("a", "b"))
	a.mustApply(batch(1, report("a", 1, ok("b", 100), ok("c", 100))))
	if got := gaps("a"); got != "[]" {
		t.Errorf("gaps of a while c is no member: %s, want []", got)
	}
	a.mustApply(members("a", "b", "c"))
	if got := gaps("a"); got != "[c]" {
		t.Errorf("gaps of a once c is a member: %s, want [c] (its result was dropped)", got)
	}
	if got := gaps("c"); got != "[a b]" {
		t.Errorf("gaps of c, which never reported: %s, want [a b]", got)
	}
	a.mustApply(batch(2, report("a", 2, ok("c", 100))))
	if got := gaps("a"); got != "[]" {
		t.Errorf("gaps of a after it reported c: %s, want []", got)
	}
	a.mustApply(members("a", "b"))
	a.mustApply(members("a", "b", "c"))
	if got := gaps("a"); got != "[c]" {
		t.Errorf("gaps of a after c left and came back: %s, want [c]", got)
	}
}

// TestRowGapsOfManyRows: with rows holding random subsets of a zone of 20,
// each row's gaps are exactly the members it holds no cell about.
func TestRowGapsOfManyRows(t *testing.T) {
	s := newStore(t)
	a := newApplier(t, s)
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("n%02d", i))
	}
	a.mustApply(members(names...))
	rng := rand.New(rand.NewPCG(1, 2))
	for i, checker := range names {
		var results []zone.Result
		want := []string{}
		for _, peer := range names {
			switch {
			case peer == checker:
			case rng.IntN(3) == 0:
				want = append(want, peer)
			default:
				results = append(results, ok(peer, 100))
			}
		}
		a.mustApply(batch(i+1, report(checker, 1, results...)))
		got, err := s.RowGaps(checker)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("gaps of %s: %v, want %v", checker, got, want)
		}
	}
}
