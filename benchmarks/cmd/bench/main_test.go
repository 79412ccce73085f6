package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/edgequorum/edgequorum/benchmarks/suite"
)

func TestQuietKlogKeepsErrorsOffStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	var buf bytes.Buffer
	err = quietKlog(&buf)
	klog.Error("watch cancelled")
	klog.Flush()
	os.Stderr = stderr
	w.Close()
	leaked, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaked) > 0 {
		t.Errorf("klog wrote %q to stderr", leaked)
	}
	if !strings.Contains(buf.String(), "watch cancelled") {
		t.Errorf("klog output %q lacks the error line", buf.String())
	}
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	cfg := suite.FullConfig()
	cfg.Kills, cfg.Cut = 0, time.Second
	err := flagErrors(cfg.ValidatePlan())
	if err == nil {
		t.Fatal("a plan with -kills 0 and -cut 1s passed")
	}
	for _, want := range []string{"-kills is 0", "-cut is 1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("flagErrors = %q, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Config.") {
		t.Errorf("flagErrors = %q still names struct fields", err)
	}
	full := suite.FullConfig()
	if flagErrors(full.ValidatePlan()) != nil {
		t.Error("the full profile's plan was rejected")
	}
}

// TestMergeKeepsAFullRunAndAddsLossyLevels merges an -only-lossy run into a
// full one: the full run's systems stay (the lossy run measured none of them),
// its loss levels are added one by one and say which run they came from, and
// a signing cost the full run lacks is taken from the later run.
func TestMergeKeepsAFullRunAndAddsLossyLevels(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	full := suite.Report{Commit: "aaa", Took: time.Hour, Sizes: []suite.SizeResult{{N: 5,
		Ours:  suite.System{Name: "edgequorum", Ran: true, FormSeconds: 5},
		Lossy: []suite.LossLevel{{Percent: 20, Ours: suite.LossFigures{Ran: true, FalseVerdicts: 3}}}}}}
	lossy := suite.Report{Commit: "bbb", Started: time.Date(2026, 11, 24, 13, 20, 0, 0, time.UTC), Took: 10 * time.Minute,
		Signing: suite.SigningCost{SignNs: 40000},
		Sizes: []suite.SizeResult{{N: 5, Ours: suite.System{Name: "edgequorum"},
			Lossy: []suite.LossLevel{{Percent: 5, Ours: suite.LossFigures{Ran: true}}, {Percent: 20, Ours: suite.LossFigures{Ran: true}}}}}}
	rep, err := merge([]string{write("full.json", full), write("lossy.json", lossy)})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Sizes[0]
	if !r.Ours.Ran || r.Ours.FormSeconds != 5 {
		t.Errorf("the full run's figures were replaced by a run that did not measure them: %+v", r.Ours)
	}
	if len(r.Lossy) != 2 || r.Lossy[0].Percent != 5 || r.Lossy[1].Percent != 20 || r.Lossy[1].Ours.FalseVerdicts != 0 {
		t.Errorf("loss levels %+v, want 5 %% and 20 %% from the later run", r.Lossy)
	}
	for _, l := range r.Lossy {
		if l.From != "2026-11-24 13:20 UTC, commit bbb" {
			t.Errorf("level %d %% says it came from %q", l.Percent, l.From)
		}
	}
	if r.From != "" {
		t.Errorf("size 5 says it came from %q, but the later run measured none of its systems", r.From)
	}
	if rep.Signing.SignNs != 40000 {
		t.Errorf("signing cost %+v, want the later run's", rep.Signing)
	}
	// The header's duration is the full run's; the later run's figures
	// carry its own date.
	if rep.Took != time.Hour {
		t.Errorf("took %s, want the full run's 1h0m0s", rep.Took)
	}
}

// TestMergeMarksReplacedSizes merges a run of some sizes into a full one:
// the sizes it measured take its figures and say which run they came from,
// in the summary too; the others stay the full run's, unmarked.
func TestMergeMarksReplacedSizes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	ran := func(form float64) suite.System { return suite.System{Ran: true, FormSeconds: form} }
	full := suite.Report{Commit: "aaa", Sizes: []suite.SizeResult{{N: 9, Ours: ran(1), Base: ran(1)}, {N: 17, Ours: ran(1), Base: ran(1)}}}
	later := suite.Report{Commit: "ccc", Started: time.Date(2026, 11, 24, 14, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 17, Ours: ran(2), Base: ran(2)}, {N: 33, Ours: ran(3), Base: ran(3)}}}
	rep, err := merge([]string{write("full.json", full), write("later.json", later)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]struct {
		form float64
		from string
	}{9: {1, ""}, 17: {2, "2026-11-24 14:00 UTC, commit ccc"}, 33: {3, "2026-11-24 14:00 UTC, commit ccc"}}
	for _, r := range rep.Sizes {
		if w := want[r.N]; r.Ours.FormSeconds != w.form || r.From != w.from {
			t.Errorf("N=%d: formation %v from %q, want %v from %q", r.N, r.Ours.FormSeconds, r.From, w.form, w.from)
		}
	}
	if sum := suite.SummaryTable(rep); !strings.Contains(sum, "N = 17, 33 † come from a separate run (2026-11-24 14:00 UTC, commit ccc)") ||
		!strings.Contains(sum, "| 17 † |") || strings.Contains(sum, "| 9 † |") {
		t.Errorf("summary does not mark the merged sizes:\n%s", sum)
	}
}

// writeReport saves r as a results.json under dir, as a run would.
func writeReport(t *testing.T, dir, name string, r suite.Report) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMergeAddsTheRealTimeLeader merges an -only-live run into a full one:
// the full run's systems stay, the size gains the real-time figures marked
// with their run, and a later live run that did not run changes nothing.
func TestMergeAddsTheRealTimeLeader(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	full := suite.Report{Commit: "aaa", Sizes: []suite.SizeResult{{N: 129, Ours: suite.System{Ran: true, FormSeconds: 32}}}}
	live := suite.Report{Commit: "ddd", Started: time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 129, Live: &suite.Live{Ran: true, LeaderCPU: 6}}}}
	idle := suite.Report{Commit: "eee", Sizes: []suite.SizeResult{{N: 129, Live: &suite.Live{}}}}
	rep, err := merge([]string{write("full.json", full), write("live.json", live), write("idle.json", idle)})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Sizes[0]
	if !r.Ours.Ran || r.Ours.FormSeconds != 32 || r.From != "" {
		t.Errorf("the full run's figures changed: %+v from %q", r.Ours, r.From)
	}
	if r.Live == nil || r.Live.LeaderCPU != 6 || r.Live.From != "2026-11-24 17:00 UTC, commit ddd" {
		t.Errorf("real-time leader %+v, want the live run's, marked with it", r.Live)
	}
}

func TestLiveFlags(t *testing.T) {
	cfg := suite.FullConfig()
	if err := liveFlags(&cfg, map[string]bool{}, "none", 0, false); err != nil || cfg.LiveSizes != nil {
		t.Errorf("-live-sizes none: %v, sizes %v", err, cfg.LiveSizes)
	}
	cfg = suite.FullConfig()
	cfg.Sizes = []int{65, 129}
	if err := liveFlags(&cfg, map[string]bool{"live-spares": true}, "", 3, true); err != nil ||
		!reflect.DeepEqual(cfg.LiveSizes, []int{65, 129}) || cfg.LiveSpares != 3 || !cfg.OnlyLive {
		t.Errorf("-only-live -live-spares 3: %v, %+v", err, cfg)
	}
	if err := liveFlags(&cfg, map[string]bool{}, "x", 0, false); err == nil || !strings.Contains(err.Error(), "-live-sizes") {
		t.Errorf("-live-sizes x: %v, want an error naming the flag", err)
	}
}

// TestMergeKeepsTheBaselineOfAnOursOnlyRun merges a run of edgequorum alone
// (-only-ours) into a full run and then into an already merged size: the new
// edgequorum figures replace the old, the baseline stays and its run is
// named, in the summary too.
func TestMergeKeepsTheBaselineOfAnOursOnlyRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	ran := func(form float64) suite.System { return suite.System{Ran: true, FormSeconds: form} }
	full := suite.Report{Commit: "aaa", Started: time.Date(2026, 11, 22, 22, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 3, Ours: ran(1), Base: ran(10)}, {N: 17, Ours: ran(1), Base: ran(10)}}}
	part := suite.Report{Commit: "bbb", Started: time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 17, Ours: ran(2), Base: ran(20)}}}
	ours := suite.Report{Commit: "ccc", Started: time.Date(2026, 11, 24, 21, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 3, Ours: ran(3)}, {N: 17, Ours: ran(3)}}}
	rep, err := merge([]string{write("full.json", full), write("part.json", part), write("ours.json", ours)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]struct {
		base     float64
		baseFrom string
	}{3: {10, "2026-11-22 22:00 UTC, commit aaa"}, 17: {20, "2026-11-24 13:00 UTC, commit bbb"}}
	for _, r := range rep.Sizes {
		w := want[r.N]
		if r.Ours.FormSeconds != 3 || r.From != "2026-11-24 21:00 UTC, commit ccc" {
			t.Errorf("N=%d: edgequorum formed in %v from %q, want the ours-only run's", r.N, r.Ours.FormSeconds, r.From)
		}
		if !r.Base.Ran || r.Base.FormSeconds != w.base || r.BaseFrom != w.baseFrom {
			t.Errorf("N=%d: baseline %+v from %q, want formation %v from %q", r.N, r.Base, r.BaseFrom, w.base, w.baseFrom)
		}
	}
	sum := suite.SummaryTable(rep)
	for _, note := range []string{
		"At N = 3 † edgequorum's figures come from a separate run of edgequorum alone (2026-11-24 21:00 UTC, commit ccc), merged with `-render`; the baseline's from the run of 2026-11-22 22:00 UTC, commit aaa.",
		"At N = 17 † edgequorum's figures come from a separate run of edgequorum alone (2026-11-24 21:00 UTC, commit ccc), merged with `-render`; the baseline's from the run of 2026-11-24 13:00 UTC, commit bbb.",
	} {
		if !strings.Contains(sum, note) {
			t.Errorf("summary lacks %q:\n%s", note, sum)
		}
	}
}

// TestRenderReadsResultsFromBeforeSilentDeaths: a results.json written
// before silent deaths were measured has none of their fields; it still
// loads, merges and renders, every death read as a reset.
func TestRenderReadsResultsFromBeforeSilentDeaths(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	raw := `{"Commit":"3b0ca2d","Config":{"Sizes":[5],"Kills":4},"Sizes":[{"N":5,
		"Ours":{"Name":"edgequorum","Ran":true,"Scale":1,"FormSeconds":5,"DetectCommit":[5.1,5.8],"DetectAnnot":[5.2,5.9],"Recovery":[2,2]},
		"Base":{"Name":"baseline","Ran":true,"Scale":1,"FormSeconds":2,"DetectAnnot":[2.1,2.4],"Recovery":[1,1]},"Lossy":null}]}`
	if err := os.WriteFile(old, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := merge([]string{old})
	if err != nil {
		t.Fatal(err)
	}
	o := rep.Sizes[0].Ours
	if len(o.DetectAnnot) != 2 || o.DetectAnnotSilent != nil || o.DetectCommitSilent != nil {
		t.Errorf("old figures read as %+v", o)
	}
	out := filepath.Join(dir, "out")
	if err := writeOutputs(rep, out, nil); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 5 | 5.8 / 5.9 (max of n=2 each) | — | 2.4 (max of n=2) / — |") {
		t.Errorf("results.md of the old run:\n%s", md)
	}
}

func TestDetectFlags(t *testing.T) {
	if err := detectFlags(map[string]bool{"detect": true, "sizes": true, "detect-kills": true}, false, nil); err != nil {
		t.Errorf("-detect -sizes -detect-kills: %v", err)
	}
	err := detectFlags(map[string]bool{"detect": true, "kills": true}, true, []string{"README.md"})
	for _, want := range []string{"-detect and -quick", "-readme", "-kills does not apply to -detect"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("detectFlags = %v, want it to say %q", err, want)
		}
	}
	cfg := suite.DetectConfig()
	cfg.DetectKills = 0
	cfg.LossPercents = []int{5}
	err = flagErrors(cfg.ValidatePlan())
	for _, want := range []string{"-detect-kills is 0", "-detect is set with a lossy-link phase"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("flagErrors = %v, want it to say %q", err, want)
		}
	}
}

// TestRenderDetectRuns: detection runs merge with each other into
// detect.md and detect.json, never with a full run.
func TestRenderDetectRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	sys := func(reset, silent float64) suite.System {
		return suite.System{Ran: true, Scale: 1, DetectAnnot: []float64{reset}, DetectAnnotSilent: []float64{silent}}
	}
	a := suite.Report{Commit: "aaa", Config: suite.DetectConfig(), Sizes: []suite.SizeResult{{N: 3, Ours: sys(5, 6), Base: sys(2, 3)}}}
	b := suite.Report{Commit: "bbb", Config: suite.DetectConfig(), Started: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		Sizes: []suite.SizeResult{{N: 33, Ours: sys(5.5, 6.5), Base: sys(3, 4)}}}
	rep, err := merge([]string{write("a.json", a), write("b.json", b)})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Config.DetectOnly || len(rep.Sizes) != 2 {
		t.Fatalf("merged detection runs: %+v", rep)
	}
	out := filepath.Join(dir, "out")
	if err := writeDetectOutputs(rep, out); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "detect.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 3 | silent | — | 6.0 / 6.0 (max of n=1) | 3.6 s | ❌ 1.68× | 3.0 / 3.0 (max of n=1) | ❌ 2.00× |", "| 33 † | reset |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("detect.md lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "detect.json")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(out, "results.md")); err == nil {
		t.Error("a detection run wrote results.md")
	}
	full := suite.Report{Commit: "ccc", Config: suite.FullConfig(), Sizes: []suite.SizeResult{{N: 3, Ours: sys(5, 6)}}}
	if _, err := merge([]string{write("full.json", full), write("a2.json", a)}); err == nil || !strings.Contains(err.Error(), "detection run") {
		t.Errorf("merging a detection run into a full one: %v", err)
	}
}

// TestMergeTakesTheLatestBinaries: the binaries table of a merged report is
// the latest run's that measured them, named as such; a later run that did
// not measure them keeps the earlier.
func TestMergeTakesTheLatestBinaries(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r suite.Report) string { return writeReport(t, dir, name, r) }
	bins := func(peak int64) []suite.Binary {
		return []suite.Binary{{Name: "agent", File: "edgequorum-agent", Bytes: 1, Text: 1, InitPeak: peak}}
	}
	old := suite.Report{Commit: "aaa"}
	measured := suite.Report{Commit: "bbb", Started: time.Date(2026, 11, 28, 12, 47, 0, 0, time.UTC), Binaries: bins(16 << 20)}
	none := suite.Report{Commit: "ccc"}
	rep, err := merge([]string{write("old.json", old), write("measured.json", measured), write("none.json", none)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Binaries) != 1 || rep.Binaries[0].InitPeak != 16<<20 || rep.BinariesFrom != "2026-11-28 12:47 UTC, commit bbb" {
		t.Fatalf("merged binaries %+v from %q, want the measured run's", rep.Binaries, rep.BinariesFrom)
	}
}

// TestStampedRevision: the report names the commit the agent binary says it
// was built from, marking a build from a dirty tree, and falls back to the
// tree's only for an unstamped build.
func TestStampedRevision(t *testing.T) {
	for _, tc := range []struct {
		version, want string
		ok            bool
	}{
		{"edgequorum v0.4.0-dev (revision 0856accc6599, go1.26.8, linux/amd64)\n", "0856acc", true},
		{"edgequorum v0.4.0-dev (revision 0856accc6599-dirty, go1.26.8, linux/amd64)\n", "0856acc (uncommitted changes)", true},
		{"edgequorum v0.4.0-dev (revision unknown, go1.26.8, linux/amd64)\n", "", false},
		{"usage: edgequorum-agent [flags]\n", "", false},
	} {
		got, ok := stampedRevision(tc.version)
		if got != tc.want || ok != tc.ok {
			t.Errorf("stampedRevision(%q) = %q, %v; want %q, %v", tc.version, got, ok, tc.want, tc.ok)
		}
	}
}
