package raftzone

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/raftzone/seats"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// TestMatrixStatesAndAges: every cell's state follows the verdict rule's
// freshness (the checker's last report within the vote timeout either way,
// the bound itself included), ages are counted to the view's time, the
// diagonal and missing opinions are none, and each row carries the committed
// verdict on its checker.
func TestMatrixStatesAndAges(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const vt = 17 * time.Second
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	in := store.TallyInput{
		// Out of order, as a caller might hand them: the view sorts.
		Members: []zone.Member{{Node: "d"}, {Node: "b"}, {Node: "a"}, {Node: "c"}, {Node: "e"}},
		Last: map[string]store.LastReport{
			"a": {ReceivedAt: ago(2 * time.Second)},
			"b": {ReceivedAt: ago(40 * time.Second)}, // older than the vote timeout
			"c": {ReceivedAt: now.Add(20 * time.Second)},
			"e": {ReceivedAt: ago(vt)}, // exactly at the bound: still counted
			// d never reported.
		},
		Matrix: store.Matrix{
			"a": {"b": {OK: true, Score: 90, Latency: 1500*time.Microsecond + 400*time.Nanosecond, At: ago(5 * time.Minute)}, "c": {OK: false, At: ago(3 * time.Second)}},
			"b": {"a": {OK: true, Score: 100, At: ago(time.Hour)}},
			"c": {"a": {OK: false, At: ago(time.Second)}},
			"d": {"a": {OK: true, Score: 100, At: ago(time.Second)}},
			"e": {"a": {OK: false, At: ago(vt)}},
		},
		Verdicts: map[string]zone.Verdict{"a": {Node: "a", State: zone.Healthy, Pros: 3, Cons: 1}},
	}
	v := buildMatrix(in, now, vt)
	if want := []string{"a", "b", "c", "d", "e"}; fmt.Sprint(v.Members) != fmt.Sprint(want) {
		t.Fatalf("members %v, want %v sorted", v.Members, want)
	}
	if !v.At.Equal(now) || v.VoteTimeoutSeconds != 17 {
		t.Errorf("at %v vote timeout %vs, want %v and 17s", v.At, v.VoteTimeoutSeconds, now)
	}
	states := map[string]CellState{
		"a>a": CellNone, "a>b": CellReached, "a>c": CellFailed, "a>d": CellNone,
		"b>a": CellStale, "b>c": CellNone,
		"c>a": CellStale, // a leader whose clock is behind: not fresh forever
		"d>a": CellStale, // no committed report at all
		"e>a": CellFailed,
	}
	for k, want := range states {
		var checker, target string
		fmt.Sscanf(k, "%1s>%1s", &checker, &target)
		c, ok := v.Cell(checker, target)
		if !ok || c.State != want {
			t.Errorf("cell %s: %+v (%v), want state %s", k, c, ok, want)
		}
	}
	ab, _ := v.Cell("a", "b")
	if ab.AgeSeconds == nil || *ab.AgeSeconds != 2 || ab.SinceSeconds == nil || *ab.SinceSeconds != 300 ||
		ab.Score != 90 || ab.LatencySeconds != 0.0015 || !ab.OK {
		t.Errorf("a>b = %+v: want age 2s (a's last report), held 300s, score 90, latency 1.5ms, ok", ab)
	}
	if ba, _ := v.Cell("b", "a"); ba.AgeSeconds == nil || *ba.AgeSeconds != 40 || !ba.OK {
		t.Errorf("b>a = %+v: want a stale cell that still says ok and its report's age 40s", ba)
	}
	if ca, _ := v.Cell("c", "a"); ca.AgeSeconds == nil || *ca.AgeSeconds != -20 {
		t.Errorf("c>a = %+v: want the age -20s shown as it is", ca)
	}
	if da, _ := v.Cell("d", "a"); da.AgeSeconds != nil {
		t.Errorf("d>a has age %v, but d never reported", *da.AgeSeconds)
	}
	if ad, _ := v.Cell("a", "d"); ad.AgeSeconds != nil || ad.SinceSeconds != nil || ad.OK {
		t.Errorf("a>d = %+v: a cell with no opinion carries no numbers", ad)
	}
	if r := v.Rows[0]; r.Verdict != zone.Healthy || r.Pros != 3 || r.Cons != 1 || r.LastReportAgeSeconds == nil || *r.LastReportAgeSeconds != 2 {
		t.Errorf("row a = %+v, want verdict healthy 3/1, last report 2s", r)
	}
	if r := v.Rows[3]; r.Verdict != zone.Unknown || r.LastReportAgeSeconds != nil {
		t.Errorf("row d = %+v, want verdict unknown (none committed) and no report age", r)
	}
	if _, ok := v.Cell("a", "z"); ok {
		t.Error("Cell found a target that is no member")
	}
}

// TestMatrixCountsWhatTheVerdictRuleCounts: on a zone with fresh and stale
// checkers, each column's reached and failed cells are exactly the pros and
// cons store.Tally counts: the picture's green and red are the votes.
func TestMatrixCountsWhatTheVerdictRuleCounts(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	const n, vt = 9, 10 * time.Second
	in := store.TallyInput{Last: map[string]store.LastReport{}, Matrix: store.Matrix{}}
	for i := range n {
		in.Members = append(in.Members, zone.Member{Node: fmt.Sprintf("n%d", i)})
	}
	for i, c := range in.Members {
		// Every third checker is stale, one never reported.
		switch i % 3 {
		case 0:
			in.Last[c.Node] = store.LastReport{ReceivedAt: now.Add(-time.Duration(i) * time.Second)}
		case 1:
			in.Last[c.Node] = store.LastReport{ReceivedAt: now.Add(-vt - time.Second)}
		}
		in.Matrix[c.Node] = map[string]store.Cell{}
		for j, x := range in.Members {
			if i != j && (i+j)%4 != 0 {
				in.Matrix[c.Node][x.Node] = store.Cell{OK: (i*j)%5 != 0, At: now}
			}
		}
	}
	v := buildMatrix(in, now, vt)
	tally := store.Tally(in.Members, in.Last, in.Matrix, now, vt)
	for j, target := range v.Members {
		var pros, cons int
		for _, row := range v.Rows {
			switch row.Cells[j].State {
			case CellReached:
				pros++
			case CellFailed:
				cons++
			}
		}
		if pros != tally[target].Pros || cons != tally[target].Cons {
			t.Errorf("column %s: %d reached, %d failed; the verdict rule counts %d pros, %d cons",
				target, pros, cons, tally[target].Pros, tally[target].Cons)
		}
	}
}

// TestMatrixOfAZoneOf129FitsAnAnswer: a full zone of 129, 16,641 cells,
// encodes within what a leader's matrix answer may carry, indented as the
// status server sends it, and beyond what any other peer answer may: the
// reason the matrix has a limit of its own.
func TestMatrixOfAZoneOf129FitsAnAnswer(t *testing.T) {
	now := time.Now()
	const n = 129
	in := store.TallyInput{Last: map[string]store.LastReport{}, Matrix: store.Matrix{}, Verdicts: map[string]zone.Verdict{}}
	for i := range n {
		in.Members = append(in.Members, zone.Member{Node: fmt.Sprintf("edge-site-0042-node-%03d", i)})
	}
	for _, c := range in.Members {
		in.Last[c.Node] = store.LastReport{ReceivedAt: now.Add(-1234 * time.Millisecond)}
		in.Verdicts[c.Node] = zone.Verdict{Node: c.Node, State: zone.Healthy, Pros: n - 1}
		in.Matrix[c.Node] = map[string]store.Cell{}
		for _, x := range in.Members {
			if x.Node != c.Node {
				in.Matrix[c.Node][x.Node] = store.Cell{OK: true, Score: 100, Latency: 1234567 * time.Nanosecond, At: now.Add(-987654 * time.Millisecond)}
			}
		}
	}
	v := buildMatrix(in, now, 17*time.Second)
	compact, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	indented, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if len(compact) <= maxPeerBody || len(indented) >= maxMatrixAnswer {
		t.Errorf("a zone of %d: %d bytes of JSON (%d indented); want more than a peer answer's %d and less than a matrix answer's %d",
			n, len(compact), len(indented), maxPeerBody, maxMatrixAnswer)
	}
	t.Logf("zone of %d: %d bytes of JSON, %d indented", n, len(compact), len(indented))
}

// deadNodeMatrix runs a zone of n in-process members, stops dead as if it
// died, and waits until the leader's committed view shows what an operator
// would look for: every live member failing dead, dead's own row stale, and
// the live members reaching each other. It returns the zone, its leader and
// that view.
func deadNodeMatrix(t *testing.T, n int, dead string) (*testZone, *testNode, MatrixView) {
	t.Helper()
	z := newTestZone(t, n)
	z.startAll()
	z.waitConverged(60*time.Second, seats.DesiredVoters(n, 5))
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	z.killAndJudge(dead)
	l := z.waitLeader(30 * time.Second)
	var v MatrixView
	poll.Until(t, 30*time.Second, "the leader's matrix to show "+dead+" failed and stale", func() (bool, string) {
		var err error
		if v, err = l.srv.Matrix(); err != nil {
			return false, err.Error()
		}
		for _, checker := range z.names() {
			for _, target := range z.names() {
				want := CellReached
				switch {
				case checker == target:
					want = CellNone
				case checker == dead:
					want = CellStale
				case target == dead:
					want = CellFailed
				}
				if c, ok := v.Cell(checker, target); !ok || c.State != want {
					return false, fmt.Sprintf("%s>%s is %q, want %q", checker, target, c.State, want)
				}
			}
		}
		return true, ""
	})
	return z, l, v
}

// TestMatrixOfARealZone: on a zone whose member died, the leader's view and a
// follower's (its replica holds every row) show it failed by the others and
// its own row stale, name the zone, term and leader, and a follower fetches
// the leader's view over the peer API.
func TestMatrixOfARealZone(t *testing.T) {
	z, l, v := deadNodeMatrix(t, 3, "node-3")
	if v.Zone != testZoneName || v.Node != l.name || v.Leader != l.name || v.Term != l.srv.Term() || v.Partial {
		t.Errorf("leader's view: zone %q node %q leader %q term %d partial %v; want %q, %s, %s, %d, not partial",
			v.Zone, v.Node, v.Leader, v.Term, v.Partial, testZoneName, l.name, l.name, l.srv.Term())
	}
	for _, row := range v.Rows {
		want := zone.Healthy
		if row.Checker == "node-3" {
			want = zone.Unhealthy
		}
		if row.Verdict != want {
			t.Errorf("row %s shows verdict %s, want %s", row.Checker, row.Verdict, want)
		}
	}
	var f *testNode
	for _, n := range z.running() {
		if n != l {
			f = n
		}
	}
	poll.Until(t, 30*time.Second, "a follower's own view to agree", func() (bool, string) {
		fv, err := f.srv.Matrix()
		if err != nil {
			return false, err.Error()
		}
		c, _ := fv.Cell(l.name, "node-3")
		return fv.Node == f.name && fv.Leader == l.name && c.State == CellFailed, fmt.Sprintf("node %s leader %s %s>node-3 %s", fv.Node, fv.Leader, l.name, c.State)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lv, err := f.srv.FetchLeaderMatrix(ctx)
	if err != nil {
		t.Fatalf("follower fetching the leader's matrix: %v", err)
	}
	if lv.Node != l.name || len(lv.Rows) != 3 {
		t.Errorf("follower fetched the view of %s with %d rows, want the leader %s's with 3", lv.Node, len(lv.Rows), l.name)
	}
	if c, _ := lv.Cell(f.name, "node-3"); c.State != CellFailed {
		t.Errorf("leader's view fetched: %s>node-3 is %s, want failed", f.name, c.State)
	}
}

// TestMatrixOfASpareIsItsOwnRow: a spare reads the view it copies, which holds
// its own row only, and says so (Partial); the leader's view, which it
// fetches over the peer API, holds every row.
func TestMatrixOfASpareIsItsOwnRow(t *testing.T) {
	z := newTestZone(t, 3)
	z.tweak = func(c *Config) { c.Voters, c.Standbys = 1, 0 }
	z.startAll()
	l := z.waitLeader(60 * time.Second)
	var spare *testNode
	var v MatrixView
	poll.Until(t, 60*time.Second, "a spare's matrix with its own row", func() (bool, string) {
		for _, n := range z.running() {
			if n == l || n.srv.Status().Role != "spare" {
				continue
			}
			var err error
			if v, err = n.srv.Matrix(); err != nil {
				return false, err.Error()
			}
			spare = n
			c, _ := v.Cell(n.name, l.name)
			return v.Partial && c.State == CellReached, fmt.Sprintf("%s: partial %v, %s>%s %q", n.name, v.Partial, n.name, l.name, c.State)
		}
		return false, "no spare yet"
	})
	for _, row := range v.Rows {
		for j, c := range row.Cells {
			if row.Checker != spare.name && c.State != CellNone {
				t.Errorf("the spare's view shows %s>%s %s: it holds no row but its own", row.Checker, v.Members[j], c.State)
			}
		}
	}
	if v.Leader != l.name || v.Term == 0 {
		t.Errorf("the spare's view names leader %q term %d, want %s and its term", v.Leader, v.Term, l.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lv, err := spare.srv.FetchLeaderMatrix(ctx)
	if err != nil {
		t.Fatalf("spare fetching the leader's matrix: %v", err)
	}
	if c, _ := lv.Cell(l.name, spare.name); lv.Partial || lv.Node != l.name || c.State != CellReached {
		t.Errorf("leader's view from the spare: node %s partial %v, %s>%s %q; want the leader's whole view", lv.Node, lv.Partial, l.name, spare.name, c.State)
	}
}
