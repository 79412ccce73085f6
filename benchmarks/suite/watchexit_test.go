package suite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchExitEndsTheWait: a formation wait ends as soon as an agent is
// found exited, with why as the context's cause; a stopped watch cancels
// with no cause of its own.
func TestWatchExitEndsTheWait(t *testing.T) {
	var calls atomic.Int32
	exited := fmt.Errorf("%w: n-1: bad flag", errAgentExited)
	ctx, stop := watchExit(context.Background(), time.Millisecond, func() error {
		if calls.Add(1) < 3 {
			return nil
		}
		return exited
	})
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("the watch never ended the wait")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errAgentExited) || cause != exited {
		t.Fatalf("cause %v, want the check's error", cause)
	}

	ctx, stop = watchExit(context.Background(), time.Hour, func() error { return exited })
	stop()
	stop()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("a stopped watch: cause %v, want context.Canceled", context.Cause(ctx))
	}
}
