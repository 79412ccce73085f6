package gridtick

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/slots"
)

// midnight is a start of slot 0 of a 2 s period on the grid.
var midnight = time.Unix(1_699_920_000, 0)

// A ticker keeps its slot of the grid: the first tick at the slot's next
// start, whenever it was made, then one a period on the slot's starts, even
// when a tick was taken late; the starts a receiver slept through are
// dropped, not made up in a burst.
func TestTickerKeepsItsSlot(t *testing.T) {
	const period = 2 * time.Second
	clk := clocktesting.NewFakeClock(midnight.Add(300 * time.Millisecond))
	tk := New(clk, slots.Grid{}, period, 0.5) // slot 4 of 8: 1 s into each period
	defer tk.Stop()
	for _, step := range []struct {
		to   time.Duration // since midnight
		tick bool
	}{
		{999 * time.Millisecond, false},
		{time.Second, true}, // the slot's start, not a period after it was made
		{3*time.Second - 1, false},
		{3 * time.Second, true},
		{5*time.Second + 1500*time.Millisecond, true}, // taken 1.5 s late
		{7*time.Second - 1, false},
		{7 * time.Second, true},          // back on the slot
		{9*time.Second + 2*period, true}, // 11 s and 13 s slept through
		{15*time.Second - 1, false},      // no burst to catch up
		{15 * time.Second, true},
	} {
		clk.SetTime(midnight.Add(step.to))
		got := false
		select {
		case <-tk.C():
			got = true
			tk.Next()
		default:
		}
		if got != step.tick {
			t.Fatalf("at +%v: ticked %v, want %v", step.to, got, step.tick)
		}
	}
}

func TestStoppedTickerDoesNotTick(t *testing.T) {
	clk := clocktesting.NewFakeClock(midnight)
	tk := New(clk, slots.ZoneGrid("zone-a"), 2*time.Second, 0.9)
	tk.Stop()
	clk.SetTime(midnight.Add(10 * time.Second))
	select {
	case <-tk.C():
		t.Fatal("a stopped ticker ticked")
	default:
	}
}
