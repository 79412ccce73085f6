// Package gridtick is a ticker on the zone's grid of start times
// (internal/slots) for the loops that run on k8s.io/utils/clock: a member's
// periodic reports, its spare view copies, its apiserver checks and its probe
// target syncs keep a slot of the grid, so that they share their wakeups
// with the probes of that slot.
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
// start, then one a period from there on the clock's monotonic time. Like a
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
	now := clk.Now()
	d := grid.Delay(now, 0, period, f)
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
