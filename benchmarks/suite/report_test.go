package suite

import (
	"slices"
	"strings"
	"testing"
)

// TestTargetTimes keeps a ratio just over or under its target of 1 from
// printing as 1.00× next to a verdict it seems to contradict.
func TestTargetTimes(t *testing.T) {
	for x, want := range map[float64]string{
		0.93:    "0.93×",
		1:       "1.00×",
		1.004:   "1.004×",
		0.9996:  "0.9996×",
		1.00004: "1.00004×",
		1.06:    "1.06×",
		12.5:    "12.50×",
		10:      "10.00×",
	} {
		if got := targetTimes(x); got != want {
			t.Errorf("targetTimes(%v) = %q, want %q", x, got, want)
		}
	}
}

// TestTailsSayWhatTheyAre: below 100 deaths the nearest-rank p99 is the
// maximum, and the cell calls it that; from 100 on it is a p99.
func TestTailsSayWhatTheyAre(t *testing.T) {
	if got := p50Tail([]float64{5, 7}); got != "5.0 / 7.0 (max of n=2)" {
		t.Errorf("p50Tail of 2 = %q", got)
	}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	if got := p50Tail(hundred); got != "50.0 / 99.0 (p99 of n=100)" {
		t.Errorf("p50Tail of 100 = %q", got)
	}
	if got := p50Tail(nil); got != "—" {
		t.Errorf("p50Tail of none = %q", got)
	}
	for _, tc := range []struct {
		a, b []float64
		want string
	}{
		{[]float64{5, 6}, []float64{7, 8}, "6.0 / 8.0 (max of n=2 each)"},
		{[]float64{5}, []float64{7, 8}, "5.0 (max of n=1) / 8.0 (max of n=2)"},
		{[]float64{5, 6}, nil, "6.0 (max of n=2) / —"},
		{nil, nil, "—"},
	} {
		if got := tailPair(tc.a, tc.b); got != tc.want {
			t.Errorf("tailPair(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// deathsReport has both kinds of death for both systems at one size, and
// a second size from a run before silent deaths were measured.
func deathsReport() *Report {
	return &Report{Config: Config{Kills: 4}, Sizes: []SizeResult{
		{N: 5,
			Ours: System{Name: "edgequorum", Ran: true, Scale: 1, FormSeconds: 10,
				DetectCommit: []float64{5.1, 5.8}, DetectAnnot: []float64{5.2, 5.9}, Recovery: []float64{2, 2},
				DetectCommitSilent: []float64{6.3, 8.4}, DetectAnnotSilent: []float64{6.4, 8.5}, RecoverySilent: []float64{3, 3}},
			Base: System{Name: "baseline", Ran: true, Scale: 1, FormSeconds: 4,
				DetectAnnot: []float64{2.1, 2.4}, Recovery: []float64{1, 1},
				DetectAnnotSilent: []float64{3.3}, RecoverySilent: []float64{1.5}}},
		{N: 9,
			Ours: System{Name: "edgequorum", Ran: true, Scale: 1, FormSeconds: 12,
				DetectCommit: []float64{5, 5.5, 5.4}, DetectAnnot: []float64{5.1, 5.6, 5.5}, Recovery: []float64{2, 2, 2}},
			Base: System{Name: "baseline", Ran: true, Scale: 1, FormSeconds: 5, DetectAnnot: []float64{2.8}, Recovery: []float64{2}}},
	}}
}

func TestMarkdownShowsResetAndSilentDeathsApart(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, deathsReport()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		// Summary: reset and silent side by side, tails named with their counts.
		"| 5 | 5.8 / 5.9 (max of n=2 each) | 8.4 / 8.5 (max of n=2 each) | 2.4 (max of n=2) / 3.3 (max of n=1) |",
		// A run from before silent deaths: resets only, silent not measured.
		"| 9 | 5.5 / 5.6 (max of n=3 each) | — | 2.8 (max of n=1) / — |",
		// The detail table: one row per kind.
		"| 5 | reset | 5.1 / 5.8 (max of n=2) | 5.2 / 5.9 (max of n=2) | 2.0 / 2.0 (max of n=2) | 2.1 / 2.4 (max of n=2) | 1.0 / 1.0 (max of n=2) | 2.46× |",
		"| 5 | silent | 6.3 / 8.4 (max of n=2) | 6.4 / 8.5 (max of n=2) | 3.0 / 3.0 (max of n=2) | 3.3 / 3.3 (max of n=1) | 1.5 / 1.5 (max of n=1) | 2.58× |",
		"| 9 | silent | — | — | — | — | — | — |",
		// The target is judged on both kinds: silent 8.5 s misses 8 s.
		"| 5 | ❌ 5.9 s reset, 8.5 s silent |",
		"| 9 | ✅ 5.6 s reset, — silent |",
		"A **silent** death",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	sum := SummaryTable(deathsReport())
	if !strings.Contains(sum, "detect ours, silent deaths: commit / annotation (s)") || !strings.Contains(sum, "max of n=2") {
		t.Errorf("summary table does not show silent deaths:\n%s", sum)
	}
}

func TestCSVHasSilentColumns(t *testing.T) {
	var b strings.Builder
	if err := WriteCSV(&b, deathsReport()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	header := strings.Split(lines[0], ",")
	five := strings.Split(lines[1], ",")
	col := func(name string) string {
		i := slices.Index(header, name)
		if i < 0 {
			t.Fatalf("no column %s in %v", name, header)
		}
		return five[i]
	}
	for name, want := range map[string]string{
		"ours_detect_annotation_p99_s":        "5.9",
		"ours_detect_annotation_silent_p99_s": "8.5",
		"ours_detect_commit_silent_samples":   "2",
		"base_detect_annotation_silent_p50_s": "3.3",
		"base_recovery_silent_samples":        "1",
	} {
		if got := col(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestMarkdownOfARunBeforeSilentDeaths: a results.json from before silent
// deaths renders with every death called a reset, and no empty silent rows.
func TestMarkdownOfARunBeforeSilentDeaths(t *testing.T) {
	rep := deathsReport()
	rep.Sizes = rep.Sizes[1:]
	var b strings.Builder
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"4 kills (every one a reset death)", "Every death in these figures was a reset death.", "| 9 | reset |"} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	for _, unwanted := range []string{"alternat", "| 9 | silent |"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("results.md of a reset-only run has %q:\n%s", unwanted, md)
		}
	}
}
