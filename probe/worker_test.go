package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/slots"
)

func TestThreshold(t *testing.T) {
	S, F, U := Success, Failure, Unknown
	tests := []struct {
		name             string
		success, failure int
		raw              []Result
		want             []Result // state after each raw result
	}{
		{"two failures then success never fail under threshold 3", 1, 3,
			[]Result{F, F, S, F, F, S}, []Result{U, U, S, S, S, S}},
		{"flips to failure and back", 1, 3,
			[]Result{S, F, F, F, S}, []Result{S, S, S, F, S}},
		{"success threshold 2", 2, 1,
			[]Result{F, S, S, F, S, F, S, S}, []Result{F, F, S, F, F, F, F, S}},
		{"unknown until a threshold is first met", 3, 3,
			[]Result{S, S, F, F, S, S, S}, []Result{U, U, U, U, U, U, S}},
		{"raw unknown neither counts nor breaks a run", 1, 3,
			[]Result{F, U, F, U, U, F}, []Result{U, U, U, U, U, F}},
		{"raw unknown leaves a state unchanged", 1, 1,
			[]Result{S, U, U, F, U}, []Result{S, S, S, F, F}},
		{"threshold 1 follows every result", 1, 1,
			[]Result{S, F, S}, []Result{S, F, S}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := threshold{success: tt.success, failure: tt.failure}
			for i, r := range tt.raw {
				if got := th.observe(r); got != tt.want[i] {
					t.Fatalf("after %v: state %v, want %v", tt.raw[:i+1], got, tt.want[i])
				}
			}
		})
	}
}

// A worker's first probe comes after its initial delay, within one period
// of it, on the slot of the zone's grid its rand value picks
// (internal/slots): a whole number of periods after that of any other worker
// with the same slot and period, whenever it was added, so that their probes
// share a wakeup.
func TestFirstDelay(t *testing.T) {
	spec := Spec{Period: 4 * time.Second, InitialDelay: 10 * time.Second}
	now := time.Unix(1_700_000_000, 0)
	grid := slots.ZoneGrid("zone-a")
	for _, r := range []float64{0, 0.25, 0.5, 0.75, 0.99, 1, -1} {
		rand := func() float64 { return r }
		got := firstDelay(spec, grid, rand, now)
		if got < spec.InitialDelay || got >= spec.InitialDelay+spec.Period {
			t.Errorf("firstDelay(rand=%v) = %v, outside [initial delay, initial delay + period)", r, got)
		}
		later := now.Add(1234567 * time.Microsecond)
		if gap := later.Add(firstDelay(spec, grid, rand, later)).Sub(now.Add(got)); gap%spec.Period != 0 {
			t.Errorf("rand=%v: a worker added 1.23 s later first probes %v after the first one, not a whole number of periods", r, gap)
		}
	}
	if a, b := now.Add(firstDelay(spec, grid, func() float64 { return 0 }, now)), now.Add(firstDelay(spec, grid, func() float64 { return 0.5 }, now)); a.Equal(b) {
		t.Errorf("rand 0 and 0.5 both first probe at %v; slots should differ", a)
	}
}

func TestNextStart(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := 2 * time.Second
	tests := []struct {
		name string
		now  time.Duration // since t0, the previous scheduled start
		want time.Duration
	}{
		{"probe took no time", 0, 2 * time.Second},
		{"probe took a while", 1500 * time.Millisecond, 2 * time.Second},
		{"probe ended on the boundary", 2 * time.Second, 4 * time.Second},
		{"missed boundaries are dropped", 7 * time.Second, 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextStart(t0, t0.Add(tt.now), p).Sub(t0); got != tt.want {
				t.Fatalf("nextStart = t0+%v, want t0+%v", got, tt.want)
			}
		})
	}
}

// gateProber hands every probe to the test and blocks until the test answers,
// so the test knows exactly which probes ran and when.
type gateProber struct {
	clk   *clocktesting.FakeClock
	calls chan gateCall
}

type gateCall struct {
	at    time.Time
	ctx   context.Context // the probe's context, to tell whether it was given up
	reply chan Result
}

func (p *gateProber) Probe(ctx context.Context, _ string) (Result, error) {
	c := gateCall{at: p.clk.Now(), ctx: ctx, reply: make(chan Result)}
	select {
	case p.calls <- c:
	case <-ctx.Done():
		return Failure, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r, nil
	case <-ctx.Done():
		return Failure, ctx.Err()
	}
}

// startWorker runs a worker on a fake clock and stops it at cleanup.
func startWorker(t *testing.T, spec Spec, rand float64) (*clocktesting.FakeClock, *gateProber, func() []probeUpdate, context.CancelFunc) {
	t.Helper()
	clk := clocktesting.NewFakeClock(gridStart)
	p := &gateProber{clk: clk, calls: make(chan gateCall)}
	updates, cancel := runWorker(t, spec, "peer", p, clk, rand)
	return clk, p, updates, cancel
}

// runWorker runs a worker of spec with prober p against host on clk until
// cleanup. The returned function gives the updates reported so far.
func runWorker(t *testing.T, spec Spec, host string, p Prober, clk *clocktesting.FakeClock, rand float64) (func() []probeUpdate, context.CancelFunc) {
	t.Helper()
	var (
		mu      sync.Mutex
		updates []probeUpdate
	)
	m, err := newMetrics(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(0, spec.withDefaults(), host, p, ClockOf(clk), slots.Grid{}, func() float64 { return rand }, m,
		func(u probeUpdate) {
			mu.Lock()
			defer mu.Unlock()
			updates = append(updates, u)
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.start(ctx, func() { close(done) })
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return func() []probeUpdate {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(updates)
	}, cancel
}

func expectCall(t *testing.T, p *gateProber) gateCall {
	t.Helper()
	select {
	case c := <-p.calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no probe came")
		return gateCall{}
	}
}

// TestWorkerSchedule drives a worker through its first two probes on a fake
// clock: the first after the initial delay plus the injected jitter, the next one
// period later, and none a moment early.
func TestWorkerSchedule(t *testing.T) {
	tests := []struct {
		name         string
		period       time.Duration
		initialDelay time.Duration
		rand         float64
		wantFirst    time.Duration
	}{
		{"no delay, no jitter", 2 * time.Second, 0, 0, 0},
		{"jitter a quarter period", 4 * time.Second, 0, 0.25, time.Second},
		{"jitter three quarters", 4 * time.Second, 0, 0.75, 3 * time.Second},
		{"initial delay", 2 * time.Second, 10 * time.Second, 0, 10 * time.Second},
		{"initial delay plus jitter", 2 * time.Second, 10 * time.Second, 0.5, 11 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The timeout is real time; make it long enough never to
			// interfere with the test answering the probe.
			spec := Spec{Kind: KindTCP, Port: 1, Period: tt.period, Timeout: tt.period, InitialDelay: tt.initialDelay}
			clk, p, _, _ := startWorker(t, spec, tt.rand)
			start := clk.Now()
			armed := func() bool { return clk.Waiters() == 1 }
			poll.UntilTrue(t, waitTimeout, "worker armed", armed)

			// stepTo moves the clock to start+d. While the worker is
			// armed and no probe is pending, a timer that fired leaves
			// the clock without waiters until the test answers, so
			// Waiters() tells at once whether it fired.
			stepTo := func(d time.Duration) { clk.Step(start.Add(d).Sub(clk.Now())) }
			if tt.wantFirst > 0 {
				stepTo(tt.wantFirst - time.Millisecond)
				if !armed() {
					t.Fatalf("probe ran before %v", tt.wantFirst)
				}
			}
			stepTo(tt.wantFirst)
			c := expectCall(t, p)
			if got := c.at.Sub(start); got != tt.wantFirst {
				t.Fatalf("first probe at +%v, want +%v", got, tt.wantFirst)
			}
			c.reply <- Success
			poll.UntilTrue(t, waitTimeout, "worker re-armed", armed)

			stepTo(tt.wantFirst + tt.period - time.Millisecond)
			if !armed() {
				t.Fatalf("second probe ran before one period had passed")
			}
			stepTo(tt.wantFirst + tt.period)
			c = expectCall(t, p)
			if got := c.at.Sub(start); got != tt.wantFirst+tt.period {
				t.Fatalf("second probe at +%v, want +%v", got, tt.wantFirst+tt.period)
			}
			c.reply <- Success
		})
	}
}

// TestWorkerDiscardsOutcomeOnStop checks that a probe cut short because the
// target is being removed is not reported as a failure of the target.
func TestWorkerDiscardsOutcomeOnStop(t *testing.T) {
	clk, p, updates, cancel := startWorker(t, Spec{Kind: KindTCP, Port: 1, Timeout: time.Minute, Period: time.Minute}, 0)
	poll.UntilTrue(t, waitTimeout, "worker armed", func() bool { return clk.Waiters() == 1 })
	clk.Step(0)
	expectCall(t, p) // never answered: the probe is in flight
	cancel()
	poll.UntilTrue(t, waitTimeout, "worker stopped", func() bool { return !clk.HasWaiters() })
	if u := updates(); len(u) != 0 {
		t.Fatalf("worker reported %+v for a probe cancelled by shutdown", u)
	}
}

// TestWorkerLingersAgentProbes lets an agent probe miss its timeout: it counts
// as a failure at once, but its call goes on until the next probe is due, that
// probe sends nothing while it does, and an answer frees the next one. Every
// other kind gives its call up at the timeout.
func TestWorkerLingersAgentProbes(t *testing.T) {
	const period, timeout = time.Minute, 50 * time.Millisecond
	updatesBy := func(t *testing.T, updates func() []probeUpdate, n int) []probeUpdate {
		t.Helper()
		poll.UntilTrue(t, waitTimeout, strconv.Itoa(n)+" updates", func() bool { return len(updates()) >= n })
		return updates()
	}
	t.Run("agent", func(t *testing.T) {
		clk, p, updates, _ := startWorker(t, Spec{Kind: KindAgent, Period: period, Timeout: timeout}, 0)
		armed := func() bool { return clk.Waiters() == 1 }
		poll.UntilTrue(t, waitTimeout, "worker armed", armed)
		clk.Step(0)
		first := expectCall(t, p)
		u := updatesBy(t, updates, 1)[0]
		if u.raw != Failure || !errors.Is(u.err, context.DeadlineExceeded) {
			t.Fatalf("unanswered probe = %v (%v), want a Failure for the deadline", u.raw, u.err)
		}
		if first.ctx.Err() != nil {
			t.Fatalf("the late probe's call was given up at its timeout: %v", first.ctx.Err())
		}

		poll.UntilTrue(t, waitTimeout, "worker re-armed", armed)
		clk.Step(period)
		u = updatesBy(t, updates, 2)[1]
		if u.raw != Failure || !strings.Contains(fmt.Sprint(u.err), "previous probe still unanswered") {
			t.Fatalf("probe behind an unanswered one = %v (%v), want a Failure naming its predecessor", u.raw, u.err)
		}
		select {
		case c := <-p.calls:
			t.Fatalf("a second probe went out at +%v while the first was unanswered", c.at.Sub(first.at))
		default:
		}

		first.reply <- Success // late: frees the way, changes nothing
		poll.UntilTrue(t, waitTimeout, "worker re-armed", armed)
		clk.Step(period)
		third := expectCall(t, p)
		third.reply <- Success
		u = updatesBy(t, updates, 3)[2]
		if u.raw != Success {
			t.Fatalf("probe after the late answer = %v (%v), want Success", u.raw, u.err)
		}
		if n := len(updates()); n != 3 {
			t.Fatalf("%d updates, want 3: the late answer must not count", n)
		}
	})
	t.Run("agent stopped while lingering", func(t *testing.T) {
		clk, p, updates, cancel := startWorker(t, Spec{Kind: KindAgent, Period: period, Timeout: timeout}, 0)
		poll.UntilTrue(t, waitTimeout, "worker armed", func() bool { return clk.Waiters() == 1 })
		clk.Step(0)
		first := expectCall(t, p)
		updatesBy(t, updates, 1)
		cancel()
		select {
		case <-first.ctx.Done():
		case <-time.After(waitTimeout):
			t.Fatal("stopping the worker did not cancel its lingering probe")
		}
	})
	t.Run("tcp", func(t *testing.T) {
		clk, p, updates, _ := startWorker(t, Spec{Kind: KindTCP, Port: 1, Period: period, Timeout: timeout}, 0)
		poll.UntilTrue(t, waitTimeout, "worker armed", func() bool { return clk.Waiters() == 1 })
		clk.Step(0)
		first := expectCall(t, p)
		updatesBy(t, updates, 1)
		if first.ctx.Err() == nil {
			t.Fatal("a tcp probe's call outlived its timeout")
		}
	})
}

// TestAgentProbeKeepsItsConnection runs the real agent prober against a server
// that answers its first probe late: the second probe goes out on the same
// connection, where giving up the first request would have cost a new one (and,
// between zone members, a new handshake on both ends).
func TestAgentProbeKeepsItsConnection(t *testing.T) {
	release := make(chan struct{})
	var first atomic.Bool
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			<-release
		}
	}))
	var conns atomic.Int32
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) }) // runs first: a failed test must not hang ts.Close

	spec := mustParse(t, "agent:port="+serverPort(t, ts)+",timeout=50ms,period=1m")
	p, err := NewProber(spec, ProberOptions{AgentClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(gridStart)
	updates, _ := runWorker(t, spec, "127.0.0.1", p, clk, 0)
	armed := func() bool { return clk.Waiters() == 1 }
	poll.UntilTrue(t, waitTimeout, "worker armed", armed)
	clk.Step(0)
	poll.UntilTrue(t, waitTimeout, "the first probe to time out", func() bool { return len(updates()) == 1 })
	if u := updates()[0]; u.raw != Failure || !errors.Is(u.err, context.DeadlineExceeded) {
		t.Fatalf("late probe = %v (%v), want a Failure for the deadline", u.raw, u.err)
	}
	release <- struct{}{}
	poll.UntilTrue(t, waitTimeout, "worker re-armed", armed)
	clk.Step(time.Minute)
	poll.UntilTrue(t, waitTimeout, "the second probe", func() bool { return len(updates()) == 2 })
	if u := updates()[1]; u.raw != Success {
		t.Fatalf("second probe = %v (%v), want Success", u.raw, u.err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the server saw %d connections, want 1: the late probe's was given up", n)
	}
}

func TestWorkerProbeOnce(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		prober  ProberFunc
		wantRaw Result
		wantErr bool
	}{
		{"success clears a stray error", func(context.Context, string) (Result, error) { return Success, errBoom }, Success, false},
		{"failure keeps its error", func(context.Context, string) (Result, error) { return Failure, errBoom }, Failure, true},
		{"failure without error gets one", func(context.Context, string) (Result, error) { return Failure, nil }, Failure, true},
		{"invalid result is unknown", func(context.Context, string) (Result, error) { return Result(42), nil }, Unknown, true},
		{"panic is unknown", func(context.Context, string) (Result, error) { panic("prober bug") }, Unknown, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := newMetrics(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			spec := Spec{Kind: KindTCP, Port: 1}.withDefaults()
			w := newWorker(3, spec, "peer", tt.prober, ClockOf(clk), slots.Grid{}, func() float64 { return 0 }, m, nil)
			u, ok := w.probeOnce(context.Background())
			if !ok {
				t.Fatal("probeOnce reported a shutdown")
			}
			if u.index != 3 || u.raw != tt.wantRaw || (u.err != nil) != tt.wantErr {
				t.Fatalf("probeOnce = %+v, want raw %v with error %v", u, tt.wantRaw, tt.wantErr)
			}
		})
	}
}
