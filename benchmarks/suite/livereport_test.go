package suite

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestTargetsTakeTheLeaderFromTheRealTimeRun checks that at a size with a
// real-time leader phase the leader's CPU and bytes and the spare targets
// are judged on its figures, marked as such, while a size without one keeps
// its own and shows no spare figure; and that the N = 129 table names the
// run of every figure.
func TestTargetsTakeTheLeaderFromTheRealTimeRun(t *testing.T) {
	steady := func(leaderCPU, leaderBytes, node float64) System {
		return System{Ran: true, Scale: 16, FormSeconds: 30, Steady: Steady{Members: 3, LeaderCPU: leaderCPU, LeaderSent: leaderBytes,
			NodeSent: node, ZoneBytes: 1000, LeaderRecv: 0, NodeRecv: 0, LeaderRSS: 1, NodeRSSMax: 1, NodeBytesMax: math.NaN()}}
	}
	r := SizeResult{N: TargetSize, Ours: steady(30, 5000, 1), Base: steady(0, 0, 1000)}
	r.Base.Steady.ZoneBytes = 100000
	cells := targetsFor(r)
	if got := cells[6].String(); got != "❌ 50.0 % ⏱ bound" {
		t.Errorf("leader CPU without a real-time run = %q, want the dilated bound, missed", got)
	}
	if cells[7].String() != "—" || cells[8].String() != "—" {
		t.Errorf("spare targets without a real-time run = %q, %q, want —", cells[7], cells[8])
	}
	r.Live = &Live{Ran: true, LeaderCPU: 3, LeaderSent: 400, LeaderRecv: 100, SpareSent: 50, SpareRecv: 40, SpareRSS: 30 << 20,
		LeaderRSS: 70 << 20, LeaderRSSFile: 41 << 20, RolesHeld: true, FormSeconds: 100, Servers: 7}
	cells = targetsFor(r)
	for i, want := range map[int]string{3: "✅ 0.50× real time", 6: "✅ 5.0 % real time", 7: "✅ 1/11.1 real time", 8: "✅ 30 MiB real time"} {
		if got := cells[i].String(); got != want {
			t.Errorf("target %d = %q, want %q", i, got, want)
		}
	}
	var b strings.Builder
	writeLive(&b, &Report{Sizes: []SizeResult{r}, Commit: "3b0ca2d", Started: time.Date(2026, 11, 22, 22, 1, 0, 0, time.UTC)})
	out := b.String()
	for _, want := range []string{
		"| leader peak RSS ≤ 64 MiB | ❌ 70 MiB | real-time leader phase |",
		"| zone bytes/s ≤ 1/50 of the baseline's | ✅ 1/100.0 | full-zone run, ⏱×16 (2026-11-22 22:01 UTC, commit 3b0ca2d) |",
		"| 7 + 0 / 0 |",
		"| 5.0 | 70 (41 MiB in file pages) |",
		"| 1/11.1 | 30 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("real-time section lacks %q:\n%s", want, out)
		}
	}
}

// TestLiveThatDidNotFormIsNoTargetMet: a real-time phase whose zone never
// formed measured nothing; its zero figures must not read as targets met.
func TestLiveThatDidNotFormIsNoTargetMet(t *testing.T) {
	rep := &Report{Config: FullConfig(), Sizes: []SizeResult{{N: 129,
		Live: &Live{Ran: true, Servers: 7, Spares: 1, StandIns: 121, Errors: []string{"formation: timed out after 7m18s"}}}}}
	var b strings.Builder
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, bad := range []string{"✅ 0 MiB", "✅ 0.0 %"} {
		if strings.Contains(md, bad) {
			t.Errorf("the report shows %q for a phase that measured nothing", bad)
		}
	}
	for _, want := range []string{"❌ " + notFormed + ": formation: timed out after 7m18s", "| leader peak RSS ≤ 64 MiB | ❌ " + notFormed} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if n := liveNote(rep); !strings.Contains(n, "did not form") {
		t.Errorf("README note %q does not say the zone did not form", n)
	}
}
