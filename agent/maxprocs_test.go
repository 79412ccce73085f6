package agent

import (
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

// TestApplyMaxProcs: --max-procs sets the runtime's parallelism, 0 leaves
// the runtime's own, and GOMAXPROCS in the environment wins over the flag.
func TestApplyMaxProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(3)
	applyMaxProcs(1, log)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("--max-procs 1 left %d procs", got)
	}
	runtime.GOMAXPROCS(3)
	applyMaxProcs(0, log)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("--max-procs 0 changed the runtime's %d procs to %d", 3, got)
	}
	t.Setenv("GOMAXPROCS", "3")
	applyMaxProcs(1, log)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("with GOMAXPROCS set, --max-procs 1 changed the procs to %d", got)
	}
}

// TestMaxProcsOutsideItsRangeIsRefused: a negative count, or one no agent
// needs, is refused by name before anything starts.
func TestMaxProcsOutsideItsRangeIsRefused(t *testing.T) {
	for _, n := range []int{-1, maxMaxProcs + 1} {
		c := validConfig()
		c.MaxProcs = n
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--max-procs") {
			t.Errorf("--max-procs %d: error %v, want one naming the flag", n, err)
		}
	}
	for _, n := range []int{0, DefaultMaxProcs, 2, maxMaxProcs} {
		c := validConfig()
		c.MaxProcs = n
		if err := c.Validate(); err != nil {
			t.Errorf("--max-procs %d refused: %v", n, err)
		}
	}
}
