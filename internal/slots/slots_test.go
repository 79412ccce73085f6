package slots

import (
	"fmt"
	"testing"
	"time"
)

// start is the first run Delay gives: now plus the delay.
func start(now time.Time, minDelay, period time.Duration, f float64) time.Time {
	return now.Add(Grid{}.Delay(now, minDelay, period, f))
}

// onSlot reports whether t is a start of the k-th slot of a period.
func onSlot(t time.Time, period time.Duration, k int) bool {
	return (t.Sub(epoch)-time.Duration(k)*(period/PerPeriod))%period == 0
}

func TestDelayStartsOnTheSlotAfterTheMinimum(t *testing.T) {
	period := 2 * time.Second
	base := time.Unix(1_700_000_000, 0)
	for _, off := range []time.Duration{0, 1, time.Millisecond, 249 * time.Millisecond, 250 * time.Millisecond,
		251 * time.Millisecond, time.Second, 1999 * time.Millisecond, 2*time.Second - 1} {
		for _, minDelay := range []time.Duration{0, 300 * time.Millisecond, 10 * time.Second} {
			for k := range PerPeriod {
				f := float64(k) / PerPeriod
				now := base.Add(off)
				d := Grid{}.Delay(now, minDelay, period, f)
				if d < minDelay || d >= minDelay+period {
					t.Errorf("Delay(+%v, min %v, slot %d) = %v, outside [min, min+period)", off, minDelay, k, d)
				}
				if s := now.Add(d); !onSlot(s, period, k) {
					t.Errorf("Delay(+%v, min %v, slot %d) starts at +%v, not on its slot", off, minDelay, k, s.Sub(base))
				}
			}
		}
	}
}

// The point of the grid: tasks that pick one slot start together (a whole
// number of periods apart) however far apart they were added, and tasks of
// different slots a slot's width apart.
func TestDelayTasksOfOneSlotStartTogether(t *testing.T) {
	period := 2 * time.Second
	base := time.Unix(1_700_000_000, 123_456_789)
	first := start(base, 0, period, 0.3)
	for _, later := range []time.Duration{time.Nanosecond, 17 * time.Millisecond, 700 * time.Millisecond, 5*time.Second + 3} {
		s := start(base.Add(later), 0, period, 0.3)
		if gap := s.Sub(first); gap%period != 0 {
			t.Errorf("a task added %v later starts %v after the first, not a whole number of periods", later, gap)
		}
	}
	a, b := start(base, 0, period, 0), start(base, 0, period, 1.0/PerPeriod)
	if gap := (b.Sub(a) + period) % period; gap != period/PerPeriod {
		t.Errorf("neighbouring slots start %v apart, want %v", gap, period/PerPeriod)
	}
}

func TestDelaySpreadsOverEverySlot(t *testing.T) {
	period := 8 * time.Second
	now := time.Unix(1_700_000_000, 5)
	phases := map[time.Duration]bool{}
	for i := range 1000 {
		s := start(now, 0, period, float64(i)/1000)
		phases[s.Sub(epoch)%period] = true
	}
	if len(phases) != PerPeriod {
		t.Errorf("f over [0, 1) gave %d start phases, want %d", len(phases), PerPeriod)
	}
}

func TestDelayOddInput(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	period := 2 * time.Second
	for _, f := range []float64{-0.5, 1, 7} {
		if got, want := (Grid{}).Delay(now, 0, period, f), (Grid{}).Delay(now, 0, period, 0); got != want {
			t.Errorf("Delay(f=%v) = %v, want slot 0's %v", f, got, want)
		}
	}
	if got := (Grid{Phase: 0.5}).Delay(now, 3*time.Second, PerPeriod-1, 0.5); got != 3*time.Second {
		t.Errorf("Delay with a period shorter than the slots = %v, want the minimum 3s", got)
	}
	// A clock before the epoch (a fake clock's zero time) still lands in range.
	for _, now := range []time.Time{{}, time.Unix(-1_000_000, 7)} {
		if d := (Grid{Phase: 0.3}).Delay(now, time.Second, period, 0.6); d < time.Second || d >= time.Second+period {
			t.Errorf("Delay(%v) = %v, outside [1s, 3s)", now, d)
		}
	}
}

// A zone's grid is the epoch's shifted by its phase, a fraction of a slot;
// the phase is the zone's name's, the same on every member, and zones'
// differ.
func TestZoneGridShiftsTheSlots(t *testing.T) {
	const period = 2 * time.Second
	now := time.Unix(1_700_000_000, 0)
	g := Grid{Phase: 0.25}
	for k := range PerPeriod {
		f := float64(k) / PerPeriod
		plain, shifted := start(now, 0, period, f), now.Add(g.Delay(now, 0, period, f))
		if gap := shifted.Sub(plain); gap != period/PerPeriod/4 {
			t.Errorf("slot %d: phase 0.25 starts %v after phase 0, want a quarter slot (%v)", k, gap, period/PerPeriod/4)
		}
	}
	for _, bad := range []float64{-0.1, 1, 3} {
		if got, want := (Grid{Phase: bad}).Delay(now, 0, period, 0.5), (Grid{}).Delay(now, 0, period, 0.5); got != want {
			t.Errorf("phase %v: %v, want phase 0's %v", bad, got, want)
		}
	}
	a, b := ZoneGrid("edge-site-0001"), ZoneGrid("edge-site-0002")
	if a != ZoneGrid("edge-site-0001") {
		t.Error("ZoneGrid of one name differs between calls")
	}
	if a == b {
		t.Errorf("two zones share phase %v", a.Phase)
	}
	// A fleet's zones spread over the slot: no tenth of it holds more than
	// twice its share of 1000 zones.
	var tenths [10]int
	for i := range 1000 {
		p := ZoneGrid(fmt.Sprintf("site-%04d", i)).Phase
		if p < 0 || p >= 1 {
			t.Fatalf("zone %d: phase %v outside [0, 1)", i, p)
		}
		tenths[int(p*10)]++
	}
	for i, n := range tenths {
		if n > 200 {
			t.Errorf("%d of 1000 zones have a phase in [%.1f, %.1f)", n, float64(i)/10, float64(i+1)/10)
		}
	}
}
