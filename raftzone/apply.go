package raftzone

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// waitFuture waits for f with a watchdog: a raft future that never resolves (a
// stuck transfer, say) must not wedge its caller.
func waitFuture(ctx context.Context, f raft.Future, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("raft operation did not finish within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply commits one command through Raft and returns the FSM's answer.
func (s *Member) apply(ctx context.Context, kind string, cmd []byte) (any, error) {
	start := time.Now()
	f := s.raft.Apply(cmd, 10*time.Second)
	if err := waitFuture(ctx, f, 15*time.Second); err != nil {
		return nil, err
	}
	s.metrics.applyDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	resp := f.Response()
	if err, ok := resp.(error); ok && err != nil {
		return nil, fmt.Errorf("apply %s: %w", kind, err)
	}
	return resp, nil
}
