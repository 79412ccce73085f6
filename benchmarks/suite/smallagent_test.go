package suite

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// smallSize is one size of a full-zone run with memory figures: edgequorum's
// leader and largest follower, and the baseline's largest node, in MiB.
func smallSize(n int, scale, leader, follower, base, leaderWS, followerWS float64) SizeResult {
	const mb = 1 << 20
	return SizeResult{N: n,
		Ours: System{Name: "edgequorum", Ran: true, Scale: scale, FormSeconds: 10, Steady: Steady{Members: n,
			LeaderMem: MemFigures{Peak: leader * mb, WorkingSet: leaderWS * mb, WindowSeconds: 30},
			NodeMem:   MemFigures{Peak: follower * mb, WorkingSet: followerWS * mb, WindowSeconds: 30}}},
		Base: System{Name: "baseline", Ran: true, Scale: scale, FormSeconds: 4, Steady: Steady{Members: n,
			NodeMem: MemFigures{Peak: base * mb}}}}
}

// liveAt129 is a real-time leader phase that formed: peak RSS in MiB, CPU
// in CPU-seconds per minute.
func liveAt129(leaderRSS, spareRSS, leaderCPU, spareCPU float64) *Live {
	return &Live{Ran: true, Servers: 7, Spares: 1, StandIns: 121, FormSeconds: 90, Leader: "n-1",
		LeaderRSS: leaderRSS * (1 << 20), SpareRSS: spareRSS * (1 << 20), LeaderCPU: leaderCPU, SpareCPU: spareCPU}
}

// TestSmallAgentTargets checks each small-agent target under and over its
// threshold, at the sizes it applies to and elsewhere, and that a zone or a
// real-time phase that did not form is a miss rather than an absence.
func TestSmallAgentTargets(t *testing.T) {
	const dash = "—"
	noLive := []string{dash, dash, dash, dash}
	notFormedCell := "❌ " + notFormed
	for _, tc := range []struct {
		name string
		r    SizeResult
		want []string
	}{
		{"N=3 under every bound", smallSize(3, 1, 20, 22, 30, 10, 9),
			append([]string{"✅ 0.73× (follower 22.0 / 30.0 MiB)", "✅ 22.0 MiB (follower)", "✅ 10.0 MiB (leader)"}, noLive...)},
		{"N=3 over every bound", smallSize(3, 1, 28, 20, 30, 11, 13),
			append([]string{"❌ 0.93× (leader 28.0 / 30.0 MiB)", "❌ 28.0 MiB (leader)", "❌ 13.0 MiB (follower)"}, noLive...)},
		// Just over a bound: the cell shows which side it is on.
		{"N=5 just over", smallSize(5, 1, 25.02, 20, 31.25, 12, 1),
			append([]string{"❌ 0.801× (leader 25.0 / 31.2 MiB)", "❌ 25.02 MiB (leader)", "(12.0 MiB (leader))"}, noLive...)},
		{"N=9 at the bounds", smallSize(9, 1, 24, 25, 31.25, 5, 5),
			append([]string{"✅ 0.80× (follower 25.0 / 31.2 MiB)", "✅ 25.0 MiB (follower)", "(5.0 MiB (leader))"}, noLive...)},
		// Time-dilated: the ratio is not about it, the bound in MiB is.
		{"N=9 dilated", smallSize(9, 2, 30, 20, 30, 5, 5),
			append([]string{"(1.00× (leader 30.0 / 30.0 MiB))", "❌ 30.0 MiB (leader)", "(5.0 MiB (leader))"}, noLive...)},
		{"N=17 for information", smallSize(17, 1, 40, 30, 35, 15, 5),
			append([]string{"(1.14× (leader 40.0 / 35.0 MiB))", "(40.0 MiB (leader))", "(15.0 MiB (leader))"}, noLive...)},
		{"N=3 no memory measured", SizeResult{N: 3, Ours: System{Ran: true, Scale: 1, FormSeconds: 5, Steady: Steady{Members: 3}}},
			[]string{dash, dash, dash, dash, dash, dash, dash}},
		{"N=3 zone did not form", SizeResult{N: 3, Ours: System{Ran: true, Scale: 1}},
			append([]string{notFormedCell, notFormedCell, notFormedCell}, noLive...)},
		{"N=5 zone did not form", SizeResult{N: 5, Ours: System{Ran: true, Scale: 1}},
			append([]string{notFormedCell, notFormedCell, dash}, noLive...)},
		{"N=129 real time under", func() SizeResult {
			r := smallSize(129, 16, 60, 30, 40, 20, 5)
			r.Live = liveAt129(50, 30, 2.4, 0.6)
			return r
		}(), []string{"(1.50× (leader 60.0 / 40.0 MiB))", "(60.0 MiB (leader))", "(20.0 MiB (leader))",
			"✅ 50.0 MiB", "✅ 30.0 MiB", "✅ 1.0 %", "✅ 4.0 %"}},
		{"N=129 real time over", SizeResult{N: TargetSize, Live: liveAt129(70, 45, 4.2, 1.8)},
			[]string{dash, dash, dash, "❌ 70.0 MiB", "❌ 45.0 MiB", "❌ 3.0 %", "❌ 7.0 %"}},
		{"N=129 real time just over", SizeResult{N: TargetSize, Live: liveAt129(64.04, 40, 3.00006, 0.9)},
			[]string{dash, dash, dash, "❌ 64.04 MiB", "✅ 40.0 MiB", "✅ 1.5 %", "❌ 5.0001 %"}},
		{"N=129 real time without spares", SizeResult{N: TargetSize, Live: func() *Live {
			l := liveAt129(50, 0, 2.4, 0)
			l.Spares = 0
			return l
		}()}, []string{dash, dash, dash, "✅ 50.0 MiB", dash, dash, "✅ 4.0 %"}},
		{"N=129 real time did not form", SizeResult{N: TargetSize,
			Live: &Live{Ran: true, Servers: 7, Spares: 1, StandIns: 121, Errors: []string{"formation: timed out"}}},
			[]string{dash, dash, dash, notFormedCell, notFormedCell, notFormedCell, notFormedCell}},
		// The quick run's real-time phase at N = 9: shown, not judged.
		{"N=9 real time", func() SizeResult {
			r := smallSize(9, 1, 20, 20, 30, 5, 5)
			r.Live = liveAt129(70, 45, 4.2, 1.8)
			return r
		}(), []string{"✅ 0.67× (leader 20.0 / 30.0 MiB)", "✅ 20.0 MiB (leader)", "(5.0 MiB (leader))",
			"(70.0 MiB)", "(45.0 MiB)", "(3.0 %)", "(7.0 %)"}},
		{"N=9 real time did not form", func() SizeResult {
			r := smallSize(9, 1, 20, 20, 30, 5, 5)
			r.Live = &Live{Ran: true}
			return r
		}(), []string{"✅ 0.67× (leader 20.0 / 30.0 MiB)", "✅ 20.0 MiB (leader)", "(5.0 MiB (leader))", dash, dash, dash, dash}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range smallAgentFor(tc.r) {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("cells:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// smallAgentHeader is the section's header row, as the issue names the targets.
const smallAgentHeader = "| N | every member's peak RSS ≤ 0.8× a baseline node's | every member's peak RSS ≤ 25 MiB | " +
	"working set ≤ 12 MiB at N = 3 | real-time leader peak RSS ≤ 64 MiB | real-time spare peak RSS ≤ 40 MiB | " +
	"real-time spare CPU ≤ 2 % of a core | real-time leader CPU ≤ 5 % of a core |"

// TestMarkdownHasSmallAgentSection: the section comes with the memory
// figures, right before their split, a row per size, and points at the
// binaries only when the report has them.
func TestMarkdownHasSmallAgentSection(t *testing.T) {
	memRep := func() *Report {
		under, over := smallSize(3, 1, 20, 22, 30, 10, 9), smallSize(5, 1, 28, 20, 30, 11, 13)
		r129 := SizeResult{N: TargetSize, Live: liveAt129(70, 30, 2.4, 1.8)}
		return &Report{Config: FullConfig(), Sizes: []SizeResult{under, over, r129}}
	}
	withBinaries := memRep()
	withBinaries.Binaries = []Binary{{Name: "edgequorum agent", File: "edgequorum-agent", Bytes: 20e6, Text: 9e6, InitPeak: 6 << 20}}
	for _, tc := range []struct {
		name              string
		rep               *Report
		want, unwanted    []string
		beforeMemorySplit bool
	}{
		{"memory figures", memRep(),
			[]string{"## Small agent\n\n" + smallAgentHeader + "\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
				"| 3 | ✅ 0.73× (follower 22.0 / 30.0 MiB) | ✅ 22.0 MiB (follower) | ✅ 10.0 MiB (leader) | — | — | — | — |\n",
				"| 5 | ❌ 0.93× (leader 28.0 / 30.0 MiB) | ❌ 28.0 MiB (leader) | (13.0 MiB (follower)) | — | — | — | — |\n",
				"| 129 | — | — | — | ❌ 70.0 MiB | ✅ 30.0 MiB | ❌ 3.0 % | ✅ 4.0 % |\n",
				"Issue 40's targets"},
			[]string{"Binary sizes and start-up RSS"}, true},
		{"memory figures and binaries", withBinaries,
			[]string{smallAgentHeader, "Binary sizes and start-up RSS are in \"Binaries\".", "## Binaries"}, nil, true},
		{"a run before the memory split", deathsReport(), nil, []string{"## Small agent", smallAgentHeader}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteMarkdown(&b, tc.rep); err != nil {
				t.Fatal(err)
			}
			md := b.String()
			for _, want := range tc.want {
				if !strings.Contains(md, want) {
					t.Errorf("results.md lacks %q:\n%s", want, md)
				}
			}
			for _, unwanted := range tc.unwanted {
				if strings.Contains(md, unwanted) {
					t.Errorf("results.md has %q:\n%s", unwanted, md)
				}
			}
			if tc.beforeMemorySplit {
				small, split := strings.Index(md, "\n## Small agent\n"), strings.Index(md, "\n## Where the memory goes\n")
				if small < 0 || split < 0 || strings.Contains(md[small+1:split], "\n## ") {
					t.Errorf("\"Small agent\" is not right before \"Where the memory goes\":\n%s", md)
				}
			}
		})
	}
}

// TestMarkdownNamesAPartialRun: the header calls a run full only when it
// ran every size and every phase of `make bench`, and otherwise says what
// it ran.
func TestMarkdownNamesAPartialRun(t *testing.T) {
	cfg := func(edit func(*Config)) Config {
		c := FullConfig()
		edit(&c)
		return c
	}
	full := FullConfig()
	for _, tc := range []struct {
		name  string
		cfg   Config
		sizes []SizeResult
		want  string
	}{
		{"make bench", full, nil, "full run (`make bench`)"},
		{"make bench-quick", QuickConfig(), nil, "quick run (`make bench-quick`)"},
		{"the full sizes in another order", cfg(func(c *Config) { c.Sizes = []int{129, 3, 5, 9, 17, 33, 65, 9} }), nil,
			"full run (`make bench`)"},
		{"-sizes 3,5,9 -live-sizes none", cfg(func(c *Config) { c.Sizes, c.LiveSizes = []int{3, 5, 9}, nil }), nil,
			"partial run (sizes 3, 5, 9; no real-time leader phase)"},
		{"-sizes 5,9,17", cfg(func(c *Config) { c.Sizes = []int{5, 9, 17} }), nil,
			"partial run (sizes 5, 9, 17; no real-time leader phase)"},
		{"-loss none -defaults-kills 0 -failovers 0", cfg(func(c *Config) { c.LossPercents, c.DefaultsKills, c.Failovers = nil, 0, 0 }), nil,
			"partial run (no leader failovers; no lossy-link phase; no run at SuperEdge's default timings)"},
		{"-only-live -sizes 129", cfg(func(c *Config) { c.Sizes, c.OnlyLive = []int{TargetSize}, true }), nil,
			"partial run (sizes 129; only the real-time leader phase, `-only-live`)"},
		{"-only-lossy", cfg(func(c *Config) { c.OnlyLossy = true }), nil, "partial run (only the lossy-link phase, `-only-lossy`)"},
		{"-only-ours", cfg(func(c *Config) { c.OnlyOurs, c.DefaultsKills, c.LossPercents = true, 0, nil }), nil,
			"partial run (edgequorum alone, `-only-ours`)"},
		{"-only-defaults", cfg(func(c *Config) { c.OnlyDefaults = true }), nil,
			"partial run (only the baseline at SuperEdge's default timings, `-only-defaults`)"},
		// A merge (-render) that brought the real-time phase in from
		// another run has every phase.
		{"merged real-time phase", cfg(func(c *Config) { c.LiveSizes = nil }),
			[]SizeResult{{N: TargetSize, Live: liveAt129(50, 30, 2.4, 0.6)}}, "full run (`make bench`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			rep := &Report{Config: tc.cfg, Sizes: tc.sizes, Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Took: time.Hour}
			if err := WriteMarkdown(&b, rep); err != nil {
				t.Fatal(err)
			}
			want := "- **Date:** 2026-01-02 03:04 UTC (took 1h0m0s) — " + tc.want + "\n"
			if !strings.Contains(b.String(), want) {
				head, _, _ := strings.Cut(b.String(), "\n- **Machine:**")
				t.Errorf("header:\n%s\nwant %q", head, want)
			}
		})
	}
}
