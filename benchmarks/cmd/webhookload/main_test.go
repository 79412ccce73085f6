package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for the webhook child: drive
// re-executes its own binary with -serve.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-serve") {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestDriveSmall runs the whole measurement small and checks what it
// reports, not how fast: every review of every kind answered, and every one
// changed by the webhook, so the figures are those of its most expensive path.
func TestDriveSmall(t *testing.T) {
	out := t.TempDir()
	if err := drive(100, 1000, 100, time.Second, out, ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "webhook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range rep.Kinds {
		kinds = append(kinds, k.Kind)
		if k.Reviews != 100 || k.Errors != 0 || k.Mutated != k.Reviews {
			t.Errorf("%s: %d reviews, %d errors, %d mutated; want 100, none, all", k.Kind, k.Reviews, k.Errors, k.Mutated)
		}
		if k.P99ms <= 0 || k.CPUShare <= 0 {
			t.Errorf("%s: p99 %v ms, CPU %v: not measured", k.Kind, k.P99ms, k.CPUShare)
		}
	}
	if !slices.Equal(kinds, []string{"node", "podstatus", "endpointslice"}) {
		t.Errorf("kinds %v", kinds)
	}
	if rep.PeakRSSMiB <= 0 || rep.IdleRSSMiB <= 0 {
		t.Errorf("RSS after sync %v MiB, peak %v MiB: not measured", rep.IdleRSSMiB, rep.PeakRSSMiB)
	}
	if _, err := os.Stat(filepath.Join(out, "webhook.md")); err != nil {
		t.Error(err)
	}
}
