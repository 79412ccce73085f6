package probe

import "time"

// Clock is what probing needs of time: when now is, a timer that calls a
// function per worker, and timers for confirmations.
// The package owns this small interface rather than importing a clock
// library, so that it stays free of Kubernetes; k8s.io/utils/clock's clocks
// fit it through ClockOf.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first (Stop then returns true).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a stoppable, resettable timer; one per worker schedules its probes.
// An AfterFunc timer's C is nil.
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
	AfterFunc(d time.Duration, f func()) T
}

// ClockOf adapts a clock whose NewTimer returns its own timer type, so that
// callers and tests inject the clocks they already use.
func ClockOf[T Timer](c TimerClock[T]) Clock { return timerClock[T]{c} }

type timerClock[T Timer] struct{ c TimerClock[T] }

func (t timerClock[T]) Now() time.Time                   { return t.c.Now() }
func (t timerClock[T]) Since(at time.Time) time.Duration { return t.c.Since(at) }
func (t timerClock[T]) NewTimer(d time.Duration) Timer   { return t.c.NewTimer(d) }

// AfterFunc starts f in a goroutine of its own: a fake clock calls the
// function inline while it holds its lock, where f could not read the clock.
func (t timerClock[T]) AfterFunc(d time.Duration, f func()) Timer {
	return t.c.AfterFunc(d, func() { go f() })
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
