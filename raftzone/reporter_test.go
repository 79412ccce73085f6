package raftzone

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A member's periodic reports keep the slot of the grid they drew: the first
// at the slot's next start, then every period, whenever the member started.
func TestReportsKeepTheirSlotOfTheGrid(t *testing.T) {
	const period = 2 * time.Second
	midnight := time.Unix(1_699_920_000, 0) // a start of every slot-0 of a 2 s period
	clk := clocktesting.NewFakeClock(midnight.Add(300 * time.Millisecond))
	g := newGridTicks(clk, period, 0.5) // slot 4 of 8: 1 s into each period
	defer g.stop()
	ticked := func() bool {
		select {
		case <-g.c():
			g.ticked()
			return true
		default:
			return false
		}
	}
	for _, step := range []struct {
		to   time.Duration // since midnight
		tick bool
	}{
		{999 * time.Millisecond, false},
		{time.Second, true}, // the slot's start, not 2 s after the member started
		{3*time.Second - 1, false},
		{3 * time.Second, true},
		{5 * time.Second, true},
	} {
		clk.SetTime(midnight.Add(step.to))
		if got := ticked(); got != step.tick {
			t.Fatalf("at +%v: ticked %v, want %v", step.to, got, step.tick)
		}
	}

	// Stopped before its first tick, it never ticks. (After it, the ticker
	// stops as any does; the fake clock's ticker cannot be stopped.)
	clk.SetTime(midnight.Add(300 * time.Millisecond))
	g = newGridTicks(clk, period, 0.5)
	g.stop()
	clk.SetTime(midnight.Add(10 * time.Second))
	if ticked() {
		t.Fatal("ticked after stop")
	}
}
