package raftzone

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// TestAReportCarriesWhatTheLeaderLacks: a member's report carries what
// differs from its own replica's row and what the leader said its replica
// lacks, or every result when full; never a result about itself.
func TestAReportCarriesWhatTheLeaderLacks(t *testing.T) {
	row := map[string]store.Cell{"b": {OK: true, Score: 100}, "c": {OK: false}}
	results := []zone.Result{{Peer: "c", OK: false}, {Peer: "a", OK: true, Score: 100}, {Peer: "b", OK: true, Score: 100}, {Peer: "d", OK: true, Score: 50}}
	peers := func(rs []zone.Result) (out []string) {
		for _, r := range rs {
			out = append(out, r.Peer)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		full  bool
		lacks map[string]bool
		want  []string
	}{
		{"differences", false, nil, []string{"d"}},
		{"the leader lacks c and e", false, map[string]bool{"c": true, "e": true}, []string{"c", "d"}},
		{"the leader lacks a, the sender", false, map[string]bool{"a": true}, []string{"d"}},
		{"full", true, nil, []string{"b", "c", "d"}},
	} {
		if got := peers(toReport("a", row, results, c.full, c.lacks)); !slices.Equal(got, c.want) {
			t.Errorf("%s: the report carries %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAFullReportOnlyWhenTheLeaderCannotSay: the first report is full; while
// the leader's answers say what its replica lacks, the next full one comes
// fullCheckedPeriod later; an answer that says nothing (a leader of an earlier
// release) brings back a full report every fullUncheckedPeriod.
func TestAFullReportOnlyWhenTheLeaderCannotSay(t *testing.T) {
	var r reportRepair
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	members := func(p string) bool { return p != "stranger" }
	step := func(at time.Duration, wantFull bool, wantLacks string) {
		t.Helper()
		full, lacks := r.plan(start.Add(at), 2*time.Second)
		var names []string
		for p := range lacks {
			names = append(names, p)
		}
		slices.Sort(names)
		if full != wantFull || fmt.Sprint(names) != wantLacks {
			t.Errorf("at +%s: full %v, lacks %v; want %v, %s", at, full, names, wantFull, wantLacks)
		}
	}
	step(0, true, "[]")
	step(time.Second, false, "[]")
	r.answered(reportAnswer{Checked: true, Lacks: []string{"c", "stranger"}}, members)
	step(2*time.Second, false, "[c]")
	r.answered(reportAnswer{Checked: true}, members)
	step(fullUncheckedPeriod, false, "[]")
	step(fullCheckedPeriod-time.Millisecond, false, "[]")
	step(fullCheckedPeriod, true, "[]")
	r.answered(reportAnswer{Queued: true}, members)
	step(fullCheckedPeriod+fullUncheckedPeriod-time.Millisecond, false, "[]")
	step(fullCheckedPeriod+fullUncheckedPeriod, true, "[]")
}

// TestFullReportsKeepTheirShareAtSlowReportPeriods: a member that reports
// every 32 s (a zone whose timers a bench stretched 16 times) sends a full
// report every 300 of its reports while the leader checks, and every 15 while
// it cannot, as a member at the default 2 s does; at periods shorter than the
// default the wall-clock periods hold.
func TestFullReportsKeepTheirShareAtSlowReportPeriods(t *testing.T) {
	for _, c := range []struct {
		report, unchecked, checked time.Duration
	}{
		{2 * time.Second, fullUncheckedPeriod, fullCheckedPeriod},
		{100 * time.Millisecond, fullUncheckedPeriod, fullCheckedPeriod},
		{32 * time.Second, 8 * time.Minute, 160 * time.Minute},
	} {
		if u, ch := fullPeriods(c.report); u != c.unchecked || ch != c.checked {
			t.Errorf("report period %s: full reports every %s unchecked, %s checked; want %s, %s", c.report, u, ch, c.unchecked, c.checked)
		}
	}
	var r reportRepair
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const period = 32 * time.Second
	if full, _ := r.plan(start, period); !full {
		t.Fatal("the first report is not full")
	}
	r.answered(reportAnswer{Checked: true}, func(string) bool { return true })
	if full, _ := r.plan(start.Add(fullCheckedPeriod), period); full {
		t.Error("a full report after 10 min at a 32 s report period: 19 reports, not 300")
	}
	if full, _ := r.plan(start.Add(300*period), period); !full {
		t.Error("no full report after 300 reports of 32 s")
	}
}

// TestALeaderGetsWhatItsReplicaDropped: a follower that cannot see the
// cluster while a member joins drops every result about the newcomer; once it
// leads, its answers name the newcomer as lacking, and every member's next
// report fills the gap — no full report needed.
func TestALeaderGetsWhatItsReplicaDropped(t *testing.T) {
	z := newTestZone(t, 4)
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		z.start(name)
	}
	l := z.waitConverged(30*time.Second, 3)
	var f *testNode
	for _, n := range z.running() {
		if n != l {
			f = n
			break
		}
	}
	f.api.down.Store(true) // its replica confirms no member change now
	z.start("node-4")
	poll.Until(t, 30*time.Second, "node-4 a member, held back on "+f.name, func() (bool, string) {
		if _, err := l.srv.store.Member("node-4"); err != nil {
			return false, "not a member on the leader"
		}
		if _, err := f.srv.store.Member("node-4"); err == nil {
			return false, "a member on " + f.name + " already"
		}
		row, err := l.srv.store.MatrixRow(l.name)
		if _, ok := row["node-4"]; err != nil || !ok {
			return false, "no result of the leader's about node-4 yet"
		}
		// node-4's first report, a full one, is in.
		if row, err := l.srv.store.MatrixRow("node-4"); err != nil || len(row) == 0 {
			return false, "no report of node-4's yet"
		}
		return true, ""
	})
	f.api.down.Store(false)
	gaps := func(n *testNode) (string, error) {
		var lacking []string
		for _, r := range z.running() {
			g, err := n.srv.store.RowGaps(r.name)
			if err != nil {
				return "", err
			}
			if slices.Contains(g, "node-4") && r.name != "node-4" {
				lacking = append(lacking, r.name)
			}
		}
		return fmt.Sprint(lacking), nil
	}
	poll.Until(t, 30*time.Second, "node-4 a member on "+f.name+", lacking results", func() (bool, string) {
		if _, err := f.srv.store.Member("node-4"); err != nil {
			return false, "held back still"
		}
		g, err := gaps(f)
		return err == nil && g != "[]", "no row lacks node-4: " + g
	})
	fulls := func() map[string]float64 {
		out := map[string]float64{}
		for _, n := range z.running() {
			out[n.name] = testutil.ToFloat64(n.srv.metrics.reportsFull)
		}
		return out
	}
	before := fulls()
	if err := l.srv.raft.LeadershipTransferToServer(raft.ServerID(f.srv.ServerID()), raft.ServerAddress(f.ip+":9470")).Error(); err != nil {
		t.Fatalf("hand over leadership to %s: %v", f.name, err)
	}
	poll.Until(t, 30*time.Second, f.name+" leads, its replica lacking nothing", func() (bool, string) {
		if now, _ := z.leader(); now != f {
			return false, f.name + " does not lead"
		}
		g, err := gaps(f)
		if err != nil {
			return false, err.Error()
		}
		return g == "[]", "rows lacking node-4: " + g
	})
	if after := fulls(); !maps.Equal(after, before) {
		t.Errorf("full reports by member %v, before the handover %v: the answers' lacks should have filled the gaps", after, before)
	}
}
