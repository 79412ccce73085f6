package probe

import "time"

// Clock is what probing needs of time: when now is, and a timer per worker.
// The package owns this small interface rather than importing a clock
// library, so that it stays free of Kubernetes; k8s.io/utils/clock's clocks
// fit it through ClockOf.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	NewTimer(d time.Duration) Timer
}

// Timer is a stoppable, resettable timer; one per worker schedules its probes.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// TimerClock is any clock whose timers fit Timer by their type T, such as
// k8s.io/utils/clock's real and fake clocks.
type TimerClock[T Timer] interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	NewTimer(d time.Duration) T
}

// ClockOf adapts a clock whose NewTimer returns its own timer type, so that
// callers and tests inject the clocks they already use.
func ClockOf[T Timer](c TimerClock[T]) Clock { return timerClock[T]{c} }

type timerClock[T Timer] struct{ c TimerClock[T] }

func (t timerClock[T]) Now() time.Time                   { return t.c.Now() }
func (t timerClock[T]) Since(at time.Time) time.Duration { return t.c.Since(at) }
func (t timerClock[T]) NewTimer(d time.Duration) Timer   { return t.c.NewTimer(d) }

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
