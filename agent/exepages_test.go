package agent

import (
	"context"
	"testing"
	"time"
)

// The start-up pages go once the member is first ready, not before, and
// not at all if the agent stops first.
func TestReleaseWhenReady(t *testing.T) {
	checks, released := 0, 0
	releaseWhenReady(t.Context(), func() bool { checks++; return checks == 3 }, time.Millisecond,
		func() { released++ })
	if checks != 3 || released != 1 {
		t.Errorf("ready after 3 checks: checked %d times, released %d times; want 3 and 1", checks, released)
	}

	ctx, cancel := context.WithCancel(t.Context())
	checks, released = 0, 0
	releaseWhenReady(ctx, func() bool {
		checks++
		if checks == 2 {
			cancel()
		}
		return false
	}, time.Millisecond, func() { released++ })
	if released != 0 {
		t.Errorf("stopped before ready: released %d times", released)
	}
}
