// Package gridtick is a ticker on the zone's grid of start times
// (internal/slots) for the loops that run on k8s.io/utils/clock: a member's
// periodic reports, its spare view copies, its apiserver checks, its probe
// target syncs and member list settling, and the leader's loops of shorter
// periods (placement, verdicts, Lease evidence) keep slots of the grid, so
// that they share their wakeups with the probes of those slots.
//
// It owns the ticker and nothing else; it must not import any package of this
// module but internal/slots. Package probe, which must not import Kubernetes,
// uses internal/slots directly.
package gridtick

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/slots"
)

// Ticker ticks at the starts of one slot of the grid, one a period, like a
// time.Ticker whose phase the grid sets: the first tick at the slot's next
// start, then one a period from there on the clock's monotonic time (NewOn:
// ticks a whole number of slots apart). Like a
// ticker it drops the ticks a slow receiver missed instead of ticking in a
// burst to catch up. Receive from C, then call Next.
type Ticker struct {
	clk    clock.Clock
	period time.Duration
	timer  clock.Timer
	due    time.Time // when the latest tick armed was due
}

// New starts a Ticker of the given period in the f-th slot of it on the
// zone's grid (f in [0, 1): at random or from a hash, to spread a zone's loops
// over the slots). The period must be positive, as a time.Ticker's: every
// caller's configuration refuses any other, naming its flag.
func New(clk clock.Clock, grid slots.Grid, period time.Duration, f float64) *Ticker {
	return NewOn(clk, grid, period, period, f)
}

// NewOn starts a Ticker of one period on the grid of another, gridPeriod (the
// zone's probe and report period): the first tick at the start of the f-th
// slot of gridPeriod, or at an earlier start a whole number of periods before
// it, and then one a period. A loop whose period is a whole number of slots
// (gridPeriod / slots.PerPeriod) so ticks only at slot starts, and one shorter
// than gridPeriod still ticks first within its own period, as a plain ticker
// would. Both periods must be positive.
func NewOn(clk clock.Clock, grid slots.Grid, gridPeriod, period time.Duration, f float64) *Ticker {
	now := clk.Now()
	d := grid.Delay(now, 0, gridPeriod, f)
	if period < gridPeriod {
		d %= period
	}
	return &Ticker{clk: clk, period: period, timer: clk.NewTimer(d), due: now.Add(d)}
}

// C is the channel the ticks come on.
func (t *Ticker) C() <-chan time.Time { return t.timer.C() }

// Next arms the tick after one received from C: a period after it was due,
// or the first such start still ahead when the receiver was later than that.
func (t *Ticker) Next() {
	now := t.clk.Now()
	t.due = t.due.Add(t.period)
	if !t.due.After(now) {
		t.due = t.due.Add((now.Sub(t.due)/t.period + 1) * t.period)
	}
	t.timer.Reset(t.due.Sub(now))
}

// Stop ends the ticks; one already due may still be in C.
func (t *Ticker) Stop() { t.timer.Stop() }
