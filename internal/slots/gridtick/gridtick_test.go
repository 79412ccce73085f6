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

// A loop of a shorter period than the grid's ticks at the grid's slot starts,
// the zone's phase included, a whole number of slots apart, and first within
// its own period, as a plain ticker would.
func TestNewOnTicksAtSlotStarts(t *testing.T) {
	const gridPeriod = 2 * time.Second
	grid := slots.Grid{Phase: 0.5} // slot starts 125 ms past each quarter second
	for _, tc := range []struct {
		name   string
		period time.Duration
		f      float64
		start  time.Duration // since midnight
		ticks  []time.Duration
	}{
		{"every slot", 250 * time.Millisecond, 0.9, 300 * time.Millisecond,
			[]time.Duration{375 * time.Millisecond, 625 * time.Millisecond, 875 * time.Millisecond}},
		{"every fourth slot", time.Second, 0.125, 300 * time.Millisecond, // slot 1: 375 ms
			[]time.Duration{375 * time.Millisecond, 1375 * time.Millisecond, 2375 * time.Millisecond}},
		{"every fourth slot, made past it", time.Second, 0.125, 400 * time.Millisecond,
			[]time.Duration{1375 * time.Millisecond, 2375 * time.Millisecond}},
		{"longer than the grid's", 5 * time.Second, 0.5, 300 * time.Millisecond, // slot 4: 1125 ms
			[]time.Duration{1125 * time.Millisecond, 6125 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(midnight.Add(tc.start))
			tk := NewOn(clk, grid, gridPeriod, tc.period, tc.f)
			defer tk.Stop()
			for _, at := range tc.ticks {
				clk.SetTime(midnight.Add(at - 1))
				select {
				case <-tk.C():
					t.Fatalf("ticked before %v", at)
				default:
				}
				clk.SetTime(midnight.Add(at))
				select {
				case <-tk.C():
					tk.Next()
				default:
					t.Fatalf("no tick at %v", at)
				}
			}
		})
	}
}
