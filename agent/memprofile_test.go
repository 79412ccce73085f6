package agent

import (
	"runtime"
	"testing"
)

// TestMemProfilingFollowsTheProfilingFlag: without --profiling the runtime
// samples no allocation; with it, the sampling rate is left as it was, so
// /debug/pprof/heap has samples to serve.
func TestMemProfilingFollowsTheProfilingFlag(t *testing.T) {
	prev := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = prev })

	runtime.MemProfileRate = 512 << 10
	applyMemProfiling(true)
	if got := runtime.MemProfileRate; got != 512<<10 {
		t.Errorf("--profiling changed the sampling rate to %d", got)
	}
	applyMemProfiling(false)
	if got := runtime.MemProfileRate; got != 0 {
		t.Errorf("without --profiling the runtime still samples one allocation per %d bytes", got)
	}
}
