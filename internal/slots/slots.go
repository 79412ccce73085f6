// Package slots puts a member's periodic zone traffic on a grid that every
// member shares, so that work with the same period starts in a few bursts a
// period instead of at times of its own. A process woken once for many
// probes, answers and reports costs a fraction of one woken for each: at 129
// members a spare probing on the grid used about half the CPU of one whose
// probes each woke it (DESIGN.md, "Probes in bursts").
//
// The grid is counted from the Unix epoch on each member's own wall clock, so
// the members of a zone whose clocks agree (NTP) share it: a peer's probes and
// reports then reach a member in the same slots as its own probes leave. A
// member whose clock is off only loses that sharing; nothing about timing
// correctness depends on it, and a task keeps its period from its first run
// on the monotonic clock.
//
// It owns the grid (PerPeriod, Delay) and nothing else: it must not import any
// package of this module or of Kubernetes (package probe uses it), nor run
// anything itself. Its sub-package gridtick is a ticker on the grid for the
// loops that run on k8s.io/utils/clock.
package slots

import "time"

// PerPeriod is how many evenly spaced start times each period offers. Eight
// measured the same CPU at 129 members as two, with bursts a quarter the
// size (a member's 256 probes a period run 32 at a time, not 128).
const PerPeriod = 8

// epoch is the grid's origin. A time without a monotonic reading, so that
// durations from it are wall-clock durations every member computes alike.
var epoch = time.Unix(0, 0)

// Delay returns how long after now a task of the given period should first
// run: at least minDelay, at the first start of its slot after that. The slot
// is the f-th of PerPeriod in each period (f in [0, 1), chosen by the caller,
// at random or by hash, to spread tasks over the period; values outside it are
// taken as 0). The result lies in [minDelay, minDelay+period). A period below
// one nanosecond per slot puts every task at minDelay.
func Delay(now time.Time, minDelay, period time.Duration, f float64) time.Duration {
	if period < PerPeriod {
		return minDelay
	}
	if !(f >= 0 && f < 1) {
		f = 0
	}
	slot := time.Duration(f*PerPeriod) * (period / PerPeriod)
	// How far the earliest start is past the latest start of the slot at or
	// before it.
	past := (now.Add(minDelay).Sub(epoch) - slot) % period
	if past < 0 {
		past += period
	}
	if past == 0 {
		return minDelay
	}
	return minDelay + period - past
}
