package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/edgequorum/edgequorum/zone"
)

// TestViewRoundTrip copies a replica's view for one member into a spare's
// store: every read a spare makes answers as the replica does for it.
func TestViewRoundTrip(t *testing.T) {
	src := newStore(t)
	a := newApplier(t, src)
	a.mustApply(members("a", "b", "c"))
	a.mustApply(batch(1, report("b", 1, ok("a", 90), fail("c")), report("a", 1, ok("b", 80))))
	a.mustApply(VerdictBatch{Verdicts: []zone.Verdict{verdict("c", zone.Unhealthy), verdict("a", zone.Healthy)}})

	v, err := src.ExportView("b")
	if err != nil {
		t.Fatal(err)
	}
	v.Cluster = json.RawMessage(`{"leader":"a"}`)
	dst := newStore(t)
	if err := dst.ImportView(v); err != nil {
		t.Fatalf("ImportView: %v", err)
	}
	for _, read := range []struct {
		name      string
		got, want func(*Store) any
	}{
		{"members", func(s *Store) any { m, _ := s.Members(); return m }, nil},
		{"verdicts", func(s *Store) any { m, _ := s.Verdicts(); return m }, nil},
		{"row of b", func(s *Store) any { m, _ := s.MatrixRow("b"); return m }, nil},
		{"last report of b", func(s *Store) any { m, _ := s.LastReport("b"); return m }, nil},
		{"seq of b", func(s *Store) any { return s.LastSeq("b") }, nil},
		{"applied", func(s *Store) any { i, tm := s.AppliedIndex(); return [2]uint64{i, tm} }, nil},
	} {
		if got, want := read.got(dst), read.got(src); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: spare reads %+v, replica %+v", read.name, got, want)
		}
	}
	if row, _ := dst.MatrixRow("a"); len(row) != 0 {
		t.Errorf("the spare holds another member's row: %v", row)
	}
	if got := string(dst.ViewCluster()); got != `{"leader":"a"}` {
		t.Errorf("cluster part %q", got)
	}

	// A later view replaces the earlier one entirely: c left.
	a.mustApply(members("a", "b"))
	v2, err := src.ExportView("b")
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.ImportView(v2); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Member("c"); !errors.Is(err, ErrNotFound) {
		t.Errorf("c is still a member after the next view: %v", err)
	}
	if dst.ViewCluster() != nil {
		t.Errorf("a view without a cluster part kept the old one: %s", dst.ViewCluster())
	}
}

// TestViewRefusesInconsistent checks what a spare refuses from the network,
// and that a refused view leaves the one it had.
func TestViewRefusesInconsistent(t *testing.T) {
	good := func() View {
		return View{Applied: 7, Node: "b", Members: members("a", "b").Members,
			Verdicts: []zone.Verdict{verdict("a", zone.Healthy)}, Row: map[string]Cell{"a": {OK: true, Score: 1}}}
	}
	dst := newStore(t)
	if err := dst.ImportView(good()); err != nil {
		t.Fatalf("good view: %v", err)
	}
	for _, tc := range []struct {
		name string
		bad  func(*View)
	}{
		{"a member twice", func(v *View) { v.Members = append(v.Members, v.Members[0]) }},
		{"a member without a server ID", func(v *View) { v.Members[0].ServerID = "" }},
		{"a verdict about a stranger", func(v *View) { v.Verdicts = append(v.Verdicts, verdict("x", zone.Unhealthy)) }},
		{"a verdict without a state", func(v *View) { v.Verdicts[0].State = "" }},
		{"a cell about a stranger", func(v *View) { v.Row["x"] = Cell{} }},
		{"a cell about itself", func(v *View) { v.Row["b"] = Cell{} }},
		{"no node", func(v *View) { v.Node = "" }},
		{"a cluster part that is no JSON", func(v *View) { v.Cluster = json.RawMessage("{") }},
	} {
		v := good()
		v.Applied = 9
		tc.bad(&v)
		if err := dst.ImportView(v); !errors.Is(err, ErrBadView) {
			t.Errorf("%s: ImportView = %v, want ErrBadView", tc.name, err)
		}
		if i, _ := dst.AppliedIndex(); i != 7 {
			t.Errorf("%s: the refused view replaced the old one (applied %d)", tc.name, i)
		}
	}
}

// TestViewSums follows the sums a server tags view parts with through the
// changes a zone makes: another member's report keeps both sums, a new
// verdict or member changes the shared one, a report of the spare's own the
// row's; parts the caller does not ask for are not copied.
func TestViewSums(t *testing.T) {
	src := newStore(t)
	a := newApplier(t, src)
	a.mustApply(members("a", "b", "c"))
	a.mustApply(batch(1, report("b", 1, ok("a", 90), fail("c"))))
	sums := func() ViewSums {
		t.Helper()
		var got ViewSums
		v, err := src.ExportViewParts("b", func(s ViewSums) (bool, bool) { got = s; return false, false })
		if err != nil {
			t.Fatal(err)
		}
		if v.Members != nil || v.Verdicts != nil || len(v.Row) != 0 {
			t.Fatalf("parts not asked for were copied: %+v", v)
		}
		if v.Last == nil || v.Last.Seq == 0 {
			t.Fatalf("the last report is always copied; got %+v", v.Last)
		}
		return got
	}
	start := sums()
	if start.Shared == start.Row {
		t.Fatal("shared and row sums are equal")
	}

	a.mustApply(batch(2, report("a", 1, ok("b", 80))))
	if got := sums(); got != start {
		t.Errorf("another member's report changed b's sums: %x, was %x", got, start)
	}
	a.mustApply(batch(3, report("b", 2, ok("a", 90), ok("c", 70))))
	changedRow := sums()
	if changedRow.Row == start.Row || changedRow.Shared != start.Shared {
		t.Errorf("a changed cell: row sum changed %v, shared sum changed %v; want true, false",
			changedRow.Row != start.Row, changedRow.Shared != start.Shared)
	}
	storeVerdicts(t, src, verdict("c", zone.Unhealthy))
	withVerdict := sums()
	if withVerdict.Shared == changedRow.Shared || withVerdict.Row != changedRow.Row {
		t.Error("a verdict must change the shared sum and only it")
	}
	a.mustApply(members("a", "b", "c", "d"))
	if sums().Shared == withVerdict.Shared {
		t.Error("a new member left the shared sum as it was")
	}

	// Asked for, the parts are what ExportView copies.
	all, err := src.ExportView("b")
	if err != nil {
		t.Fatal(err)
	}
	parts, err := src.ExportViewParts("b", func(ViewSums) (bool, bool) { return true, true })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parts, all) || len(all.Members) != 4 || len(all.Verdicts) != 1 || len(all.Row) != 2 {
		t.Errorf("ExportViewParts with every part = %+v, ExportView = %+v", parts, all)
	}
}
