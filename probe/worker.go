package probe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/internal/slots"
)

// threshold applies the kubelet's worker rule to a stream of raw results: the
// state becomes Success after SuccessThreshold consecutive successes and Failure
// after FailureThreshold consecutive failures, and is Unknown until one of them
// first happens. A raw Unknown is no evidence either way: it neither counts nor
// breaks a run, so a prober hiccup cannot reset a peer's failure count.
type threshold struct {
	success, failure int
	last             Result // last counted raw result, Success or Failure
	run              int    // how many times in a row last was seen
	state            Result
}

// observe counts r and returns the resulting state.
func (t *threshold) observe(r Result) Result {
	if r != Success && r != Failure {
		return t.state
	}
	if r == t.last {
		t.run++
	} else {
		t.last, t.run = r, 1
	}
	need := t.failure
	if r == Success {
		need = t.success
	}
	if t.run >= need {
		t.state = r
	}
	return t.state
}

// probeUpdate is what a worker reports after each probe.
type probeUpdate struct {
	index   int // the probe's position in the Manager's specs
	raw     Result
	state   Result
	err     error
	at      time.Time
	latency time.Duration
}

// worker probes one target with one spec until its context is cancelled. It owns
// its threshold state; the Manager only sees the updates it reports.
//
// A worker holds no goroutine while it waits for its next probe: it is a
// timer, and each probe runs in the goroutine the timer starts. A member
// probes every peer with every spec, so an idle goroutine per (peer, probe)
// and its stack were most of a large zone's goroutines; one timer each is
// what the wait needs. Probes of different targets still run independently,
// each in its own goroutine, so a slow target never delays another's probe.
type worker struct {
	index   int
	spec    Spec // with defaults applied
	host    string
	prober  Prober
	clock   Clock
	grid    slots.Grid // the zone's, whose slots first probes start in
	rand    func() float64
	metrics *metrics
	report  func(probeUpdate)
	th      threshold
	// suspect, if set, is called when a probe has had no answer for half
	// its timeout, while it goes on: a box that answers a connection on a
	// LAN within a millisecond is worth confirming by then (see Confirm).
	suspect func()

	// linger lets a probe that missed its timeout keep running until the
	// next one is due (agent probes; see callLingering). pending is closed
	// when such a probe's call has returned; nil when none is in flight.
	linger  bool
	pending chan struct{}

	ctx  context.Context // set by start
	done func()          // called once the worker has stopped
	once sync.Once

	mu        sync.Mutex
	timer     Timer     // the next probe's, while armed
	armed     bool      // timer is set and has not fired
	stopped   bool      // ctx has ended
	scheduled time.Time // when the next (or running) probe was due
}

func newWorker(index int, spec Spec, host string, p Prober, clk Clock, grid slots.Grid, rand func() float64,
	m *metrics, report func(probeUpdate)) *worker {
	return &worker{
		index: index, spec: spec, host: host, prober: p, clock: clk, grid: grid, rand: rand, metrics: m, report: report,
		th:     threshold{success: spec.SuccessThreshold, failure: spec.FailureThreshold},
		linger: spec.Kind == KindAgent,
	}
}

// firstDelay is how long after now a new worker probes first: after the
// initial delay, in a slot of the zone's grid (internal/slots) that rand
// picks, so that the workers of many targets added together (an agent start,
// a zone re-listing) spread over the period as kubelet's do, while the probes
// that share a slot, whenever their targets came, start in one burst. It is
// within [initial delay, initial delay + period).
func firstDelay(s Spec, grid slots.Grid, rand func() float64, now time.Time) time.Duration {
	return grid.Delay(now, s.InitialDelay, s.Period, rand())
}

// nextStart returns the first period boundary after now, counting from the
// previous scheduled start. Like a ticker, it drops the boundaries a slow probe
// or a stalled process missed instead of probing in a burst to catch up.
func nextStart(prev, now time.Time, period time.Duration) time.Time {
	next := prev.Add(period)
	if next.After(now) {
		return next
	}
	missed := now.Sub(next)/period + 1
	return next.Add(missed * period)
}

// start arms the worker's first probe, under ctx. done is called once, after
// ctx has ended and nothing of the worker runs any more (no probe, no
// lingering call), which keeps the promise that a stopped worker leaves no
// goroutine behind.
func (w *worker) start(ctx context.Context, done func()) {
	w.ctx, w.done = ctx, done
	now := w.clock.Now()
	delay := firstDelay(w.spec, w.grid, w.rand, now)
	w.mu.Lock()
	w.scheduled = now.Add(delay)
	w.timer = w.clock.AfterFunc(delay, w.fire)
	w.armed = true
	w.mu.Unlock()
	context.AfterFunc(ctx, w.stop)
}

// stop runs when ctx ends. A timer it disarms will never fire, so the worker
// is done here; otherwise a probe is running and fire finishes the worker.
func (w *worker) stop() {
	w.mu.Lock()
	w.stopped = true
	disarmed := w.armed && w.timer.Stop()
	if disarmed {
		w.armed = false
	}
	w.mu.Unlock()
	if disarmed {
		w.finish()
	}
}

// fire runs one probe, reports it, and arms the timer for the next period
// boundary. Like a ticker, it drops the boundaries a slow probe or a
// stalled process missed instead of probing in a burst to catch up.
func (w *worker) fire() {
	w.mu.Lock()
	w.armed = false
	stopped := w.stopped
	w.mu.Unlock()
	if stopped {
		w.finish()
		return
	}
	u, ok := w.probeOnce(w.ctx)
	if ok {
		w.report(u)
	}
	w.mu.Lock()
	if !ok || w.stopped {
		w.mu.Unlock()
		w.finish()
		return
	}
	now := w.clock.Now()
	w.scheduled = nextStart(w.scheduled, now, w.spec.Period)
	w.timer = w.clock.AfterFunc(w.scheduled.Sub(now), w.fire)
	w.armed = true
	w.mu.Unlock()
}

// finish waits for a lingering probe's call (its context is the worker's, so
// it returns promptly) and says the worker is done, once.
func (w *worker) finish() {
	w.once.Do(func() {
		w.awaitPending()
		w.done()
	})
}

// probeOnce runs one probe and applies the thresholds. It returns false when ctx
// was cancelled during the probe: the outcome then reflects our shutdown, not the
// target, and must not count.
func (w *worker) probeOnce(ctx context.Context) (probeUpdate, bool) {
	start := w.clock.Now()
	pctx, cancel := context.WithTimeout(ctx, w.spec.Timeout)
	var (
		raw Result
		err error
	)
	var suspicion *time.Timer
	if w.suspect != nil {
		// Real time, as the probe's own timeout is.
		suspicion = time.AfterFunc(w.spec.Timeout/2, w.suspect)
	}
	if w.linger {
		raw, err = w.callLingering(ctx, pctx)
	} else {
		raw, err = w.call(pctx)
	}
	if suspicion != nil {
		suspicion.Stop()
	}
	cancel()
	if ctx.Err() != nil {
		return probeUpdate{}, false
	}
	took := w.clock.Since(start)
	switch {
	case !raw.valid():
		err = fmt.Errorf("prober returned invalid result %d (error: %v)", int(raw), err)
		raw = Unknown
	case raw == Success:
		err = nil
	case err == nil:
		err = fmt.Errorf("probe %s", raw)
	}
	w.metrics.observe(w.spec.Kind, raw, took)
	return probeUpdate{index: w.index, raw: raw, state: w.th.observe(raw), err: err, at: start, latency: took}, true
}

// callLingering runs an agent probe whose answer counts only if it comes within
// pctx's timeout, but whose call may go on until the next probe is due: one
// period after it started, or at once on shutdown (ctx). An agent probe travels
// on a long-lived authenticated connection, and an HTTP request given up before
// its answer costs that connection; the next probe would then pay a new TLS
// handshake and zone-key proof on both ends — to a peer that was slow because
// it was busy. Under load that turned late answers into a storm of handshakes
// that kept every member busy. A late answer is discarded, but it leaves the
// connection ready for the next probe.
//
// A probe that finds its predecessor still in flight waits for it within its
// own timeout and sends nothing more to a peer that has not answered; if the
// predecessor is still running at the timeout, the probe fails.
func (w *worker) callLingering(ctx, pctx context.Context) (Result, error) {
	if w.pending != nil {
		select {
		case <-w.pending:
			w.pending = nil
		case <-pctx.Done():
			return Failure, fmt.Errorf("previous probe still unanswered after %s: %w", w.spec.Timeout, pctx.Err())
		}
	}
	type outcome struct {
		raw Result
		err error
	}
	out := make(chan outcome, 1)
	done := make(chan struct{})
	lctx, lcancel := context.WithTimeout(ctx, w.spec.Period)
	go func() {
		defer close(done)
		defer lcancel()
		raw, err := w.call(lctx)
		out <- outcome{raw, err}
	}()
	select {
	case o := <-out:
		<-done
		return o.raw, o.err
	case <-pctx.Done():
	}
	select {
	case o := <-out: // answered on the deadline: the answer wins
		<-done
		return o.raw, o.err
	default:
	}
	w.pending = done
	return Failure, fmt.Errorf("no answer within %s: %w", w.spec.Timeout, pctx.Err())
}

// awaitPending waits for a lingering probe's call to return. Its context is
// the worker's, so once the worker stops it returns promptly.
func (w *worker) awaitPending() {
	if w.pending != nil {
		<-w.pending
		w.pending = nil
	}
}

// call runs the prober, turning a panic into Unknown: a buggy injected Prober
// should make one probe inconclusive, not take the agent down with it.
func (w *worker) call(ctx context.Context) (r Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = Unknown, fmt.Errorf("prober panicked: %v", p)
		}
	}()
	return w.prober.Probe(ctx, w.host)
}
