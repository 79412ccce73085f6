// Package slots puts a member's periodic zone traffic on a grid that every
// member of its zone shares, so that work with the same period starts in a few
// bursts a period instead of at times of its own. A process woken once for
// many probes, answers and reports costs a fraction of one woken for each: at
// 129 members a spare on the grid used under half the CPU of one whose probes
// and loops each woke it (DESIGN.md, "Probes in bursts").
//
// The grid is counted from the Unix epoch on each member's own wall clock and
// shifted by a phase of the zone's own (ZoneGrid), so the members of a zone
// whose clocks agree (NTP) share it — a peer's probes and reports reach a
// member in the slots its own probes leave in — while other zones' slots start
// at other times. A member whose clock is off only loses that sharing;
// nothing about timing correctness depends on it, and a task keeps its period
// from its first run on the monotonic clock.
//
// It owns the grid (PerPeriod, Grid, ZoneGrid) and nothing else: it must not
// import any package of this module or of Kubernetes (package probe uses it),
// nor run anything itself. Its sub-package gridtick is a ticker on the grid
// for the loops that run on k8s.io/utils/clock.
package slots

import (
	"crypto/sha256"
	"encoding/binary"
	"time"
)

// PerPeriod is how many evenly spaced start times each period offers. With
// slots counted from each member's start, eight measured the same CPU at 129
// members as two, with bursts a quarter the size (a member's 256 probes a
// period run about 32 at a time, not 128) and 3 MiB less peak RSS.
const PerPeriod = 8

// epoch is the grid's origin. A time without a monotonic reading, so that
// durations from it are wall-clock durations every member computes alike.
var epoch = time.Unix(0, 0)

// Grid is one zone's grid: in each period, PerPeriod slots whose starts lie
// Phase of a slot's width past the epoch's slot boundaries. Members of one
// zone share a Phase (ZoneGrid), so their work of a slot meets; zones'
// phases differ, so that what a fleet of zones sends the cloud in its slots
// (apiserver checks) spreads over each slot instead of arriving from every
// zone at once. The zero Grid has phase 0.
type Grid struct {
	// Phase is in [0, 1); other values are taken as 0.
	Phase float64
}

// ZoneGrid is the grid of the zone of that name: its phase is a hash of the
// name, which every member of the zone knows.
func ZoneGrid(zone string) Grid {
	// SHA-256, not FNV: names that differ in their last characters
	// (site-0001, site-0002) must still spread over the slot.
	sum := sha256.Sum256([]byte(zone))
	return Grid{Phase: float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)}
}

// Delay returns how long after now a task of the given period should first
// run: at least minDelay, at the first start of its slot after that. The slot
// is the f-th of PerPeriod in each period (f in [0, 1), chosen by the caller,
// at random or by hash, to spread tasks over the period; values outside it are
// taken as 0). The result lies in [minDelay, minDelay+period). A period below
// one nanosecond per slot puts every task at minDelay.
func (g Grid) Delay(now time.Time, minDelay, period time.Duration, f float64) time.Duration {
	if period < PerPeriod {
		return minDelay
	}
	if !(f >= 0 && f < 1) {
		f = 0
	}
	phase := g.Phase
	if !(phase >= 0 && phase < 1) {
		phase = 0
	}
	width := period / PerPeriod
	slot := time.Duration(f*PerPeriod)*width + time.Duration(phase*float64(width))
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
