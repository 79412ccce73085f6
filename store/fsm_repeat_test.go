package store

import "testing"

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
