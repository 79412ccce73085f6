package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/poll"
)

// fakeDial answers confirmation connections with what the test sets, and
// counts them by address. block, when set, holds every dial until it is
// closed or the dial's context ends.
type fakeDial struct {
	mu        sync.Mutex
	err       error
	block     chan struct{}
	addresses map[string]int
}

func newFakeDial(err error) *fakeDial { return &fakeDial{err: err, addresses: map[string]int{}} }

// errSilent is what a dial that got no answer within its timeout returns.
var errSilent error = &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}

// errRefused is a reset: the box answered, its port is closed.
var errRefused error = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (d *fakeDial) set(err error, block chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err, d.block = err, block
}

func (d *fakeDial) calls(address string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addresses[address]
}

func (d *fakeDial) dial(ctx context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	d.addresses[address]++
	err, block := d.err, d.block
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err == nil {
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}
	return nil, err
}

func confirmations(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	return metricValue(t, reg, "edgequorum_probe_confirmations_total", map[string]string{"outcome": outcome})
}

// okPeer starts a harness whose one kubelet probe (failure threshold 3) has
// passed once on the target "peer" at 10.0.0.1, and scripts it to fail from
// now on: the start of every confirmation test.
func okPeer(t *testing.T, reg prometheus.Registerer, d *fakeDial, c Confirm) *harness {
	t.Helper()
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=3")}, Registerer: reg,
		Dial: d.dial, Confirm: c}, true)
	h.scripts[0].set("10.0.0.1", Success)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1", KubeletPort: 10250})
	h.round(0, 1, 1)
	if st := h.status("peer"); !st.OK || st.Silent {
		t.Fatalf("after a success: %+v, want OK", st)
	}
	h.scripts[0].set("10.0.0.1", Failure)
	return h
}

// TestConfirmJudgesASilentPeerAtOnce: one failed probe of a peer whose box
// answers no fresh connection makes it failed at once, long before the
// thresholds would; its next successful probe makes it OK again.
func TestConfirmJudgesASilentPeerAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := newFakeDial(errSilent)
	h := okPeer(t, reg, d, Confirm{Connects: 3, Gap: 100 * time.Millisecond})
	drain(h.m.Changes())
	h.clk.Step(2 * time.Second)
	// The worker re-arms and the confirmation waits for its next gap: two
	// timers; one connection so far, and the thresholds alone still say OK.
	poll.UntilTrue(t, waitTimeout, "first confirmation connection", func() bool {
		return d.calls("10.0.0.1:10250") == 1 && h.clk.Waiters() == 2
	})
	if st := h.status("peer"); !st.OK || st.Silent {
		t.Fatalf("one failure, confirmation under way: %+v, want still OK", st)
	}
	h.clk.Step(100 * time.Millisecond)
	poll.UntilTrue(t, waitTimeout, "second connection", func() bool {
		return d.calls("10.0.0.1:10250") == 2 && h.clk.Waiters() == 2
	})
	h.clk.Step(100 * time.Millisecond)
	poll.UntilTrue(t, waitTimeout, "the peer judged silent", func() bool { return h.status("peer").Silent })
	st := h.status("peer")
	if st.OK || !st.Known || st.Score != 0 || st.Probes[0].State != Success {
		t.Fatalf("silent peer: %+v, want Known, not OK, score 0, its probe's own state still Success", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("no change signalled when the peer was judged silent")
	}
	if n := d.calls("10.0.0.1:10250"); n != 3 {
		t.Fatalf("%d confirmation connections, want 3", n)
	}
	if v := confirmations(t, reg, confirmSilent); v != 1 {
		t.Fatalf("silent confirmations = %v, want 1", v)
	}

	// Further failures start no confirmation: the peer is judged already.
	h.round(1800*time.Millisecond, 1, 1)
	if n := d.calls("10.0.0.1:10250"); n != 3 {
		t.Fatalf("%d confirmation connections after another failure of a silent peer, want still 3", n)
	}
	h.scripts[0].set("10.0.0.1", Success)
	h.round(2*time.Second, 1, 1)
	if st := h.status("peer"); !st.OK || st.Silent {
		t.Fatalf("after a success: %+v, want OK and not silent", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("no change signalled when the silent peer answered")
	}
}

// TestConfirmAnsweredLeavesItToTheThresholds: a box that answers a fresh
// connection, even with a reset, is there; a stalled or restarting process
// keeps its kubelet-like grace of FailureThreshold failures.
func TestConfirmAnsweredLeavesItToTheThresholds(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{{"connected", nil}, {"refused", errRefused}} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			d := newFakeDial(tt.err)
			// One connection: a gap timer would race the harness's count
			// of armed workers.
			h := okPeer(t, reg, d, Confirm{Connects: 1})
			for i := 1; i <= 3; i++ {
				h.round(2*time.Second, 1, 1)
				poll.UntilTrue(t, waitTimeout, "confirmation answered", func() bool {
					return confirmations(t, reg, confirmAnswered) == float64(min(i, 2))
				})
				st := h.status("peer")
				if st.Silent || st.OK != (i < 3) {
					t.Fatalf("after %d failures: %+v, want OK until the third", i, st)
				}
			}
			if n := d.calls("10.0.0.1:10250"); n != 2 {
				t.Fatalf("%d connections, want one per confirmation and none once the thresholds judged", n)
			}
		})
	}
}

// TestConfirmASuccessMeanwhileWins: a probe that succeeds while the
// confirmation runs is newer evidence than its silence.
func TestConfirmASuccessMeanwhileWins(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := newFakeDial(errSilent)
	release := make(chan struct{})
	d.set(errSilent, release)
	h := okPeer(t, reg, d, Confirm{Connects: 1})
	h.round(2*time.Second, 1, 1)
	poll.UntilTrue(t, waitTimeout, "confirmation connecting", func() bool { return d.calls("10.0.0.1:10250") == 1 })
	h.scripts[0].set("10.0.0.1", Success)
	h.round(2*time.Second, 1, 1)
	close(release)
	poll.UntilTrue(t, waitTimeout, "confirmation done", func() bool { return confirmations(t, reg, confirmSilent) == 1 })
	if st := h.status("peer"); st.Silent || !st.OK {
		t.Fatalf("silence found while a later probe succeeded: %+v, want OK", st)
	}
}

// TestConfirmStopsWithItsTarget: removing a target cancels its confirmation
// and waits for it; nothing is recorded for the removed target.
func TestConfirmStopsWithItsTarget(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := newFakeDial(errSilent)
	d.set(errSilent, make(chan struct{})) // never released
	h := okPeer(t, reg, d, Confirm{Connects: 2})
	h.clk.Step(2 * time.Second)
	// The worker re-armed, the confirmation waits for its gap, its first
	// connection hangs.
	poll.UntilTrue(t, waitTimeout, "confirmation connecting", func() bool {
		return d.calls("10.0.0.1:10250") == 1 && h.clk.Waiters() == 2
	})
	h.m.RemoveTarget("peer")
	for _, o := range []string{confirmSilent, confirmAnswered, confirmInconclusive} {
		if v := confirmations(t, reg, o); v != 0 {
			t.Fatalf("%s confirmations = %v after the target was removed mid-way, want 0", o, v)
		}
	}
	if h.clk.Waiters() != 0 {
		t.Fatalf("%d timers left after the target was removed", h.clk.Waiters())
	}
}

// TestConfirmOff: Connects < 0 leaves the thresholds alone, as the kubelet.
func TestConfirmOff(t *testing.T) {
	d := newFakeDial(errSilent)
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=2")}, Dial: d.dial,
		Confirm: Confirm{Connects: -1}}, true)
	h.scripts[0].set("10.0.0.1", Success)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	h.round(0, 1, 1)
	h.scripts[0].set("10.0.0.1", Failure)
	h.round(2*time.Second, 1, 1)
	if st := h.status("peer"); !st.OK {
		t.Fatalf("one failure with confirmation off: %+v, want OK", st)
	}
	h.round(2*time.Second, 1, 1)
	if st := h.status("peer"); st.OK {
		t.Fatalf("two failures: %+v, want failed", st)
	}
	if n := d.calls("10.0.0.1:10250"); n != 0 {
		t.Fatalf("%d confirmation connections with confirmation off", n)
	}
}

func TestConnectOutcome(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, confirmAnswered},
		{errRefused, confirmAnswered},
		{os.NewSyscallError("connect", syscall.ECONNRESET), confirmAnswered},
		{errSilent, confirmSilent},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), confirmSilent},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, confirmSilent},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, confirmSilent},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}, confirmInconclusive},
		{errors.New("something else"), confirmInconclusive},
	} {
		if got := connectOutcome(tt.err); got != tt.want {
			t.Errorf("connectOutcome(%v) = %s, want %s", tt.err, got, tt.want)
		}
	}
}

func TestConfirmValidate(t *testing.T) {
	for _, tt := range []struct {
		c    Confirm
		want string
	}{
		{Confirm{Gap: -time.Second}, "gap"},
		{Confirm{Timeout: -time.Second}, "timeout"},
		{Confirm{Connects: 17}, "connects 17"},
	} {
		err := Config{Confirm: tt.c}.Validate()
		if err == nil || !strings.Contains(err.Error(), "Config.Confirm") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming Config.Confirm and %q", tt.c, err, tt.want)
		}
	}
	if c := (Confirm{}).withDefaults([]Spec{mustParse(t, "kubelet:timeout=700ms")}); c.Timeout != 700*time.Millisecond ||
		c.Connects != DefaultConfirmConnects || c.Gap != DefaultConfirmGap {
		t.Errorf("defaults with a kubelet timeout of 700ms: %+v", c)
	}
}

// TestConfirmStartsWhileAProbeHangs: a probe with no answer for half its
// timeout starts the confirmation while it goes on, so a silent peer is judged
// before that probe has even failed.
func TestConfirmStartsWhileAProbeHangs(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	release := make(chan struct{})
	var calls atomic.Int32
	agent := ProberFunc(func(context.Context, string) (Result, error) {
		if calls.Add(1) == 1 {
			return Success, nil
		}
		<-release
		return Failure, errScripted
	})
	d := newFakeDial(nil)
	m, err := New(Config{Clock: ClockOf(clk), Rand: func() float64 { return 0 }, Logger: discardLogger(),
		AgentProber: agent, Dial: d.dial, Confirm: Confirm{Connects: 1},
		// The kubelet probe answers once, then not again within the test.
		Specs: []Spec{mustParse(t, "agent:timeout=400ms"), mustParse(t, "kubelet:period=1h")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	defer close(release)
	m.AddTarget("peer", Target{Host: "10.0.0.1"})
	poll.UntilTrue(t, waitTimeout, "the workers armed", func() bool { return clk.Waiters() == 2 })
	clk.Step(0)
	poll.UntilTrue(t, waitTimeout, "the peer OK", func() bool { st, _ := m.Status("peer"); return st.OK && clk.Waiters() == 2 })
	d.set(errSilent, nil)
	clk.Step(2 * time.Second)
	poll.UntilTrue(t, waitTimeout, "the peer judged silent", func() bool { st, _ := m.Status("peer"); return st.Silent })
	if st, _ := m.Status("peer"); st.OK || !st.Known || st.Probes[0].Last != Success || st.Probes[0].At != time.Unix(0, 0) {
		t.Fatalf("silent while its agent probe still hangs: %+v, want Known, not OK, the agent probe's last result the first", st)
	}
}

// TestConfirmNeedsAPortThatAnswered: a kubelet port that never answered on a
// peer (a firewall that drops) would make every suspicion look like silence;
// no confirmation runs until it has.
func TestConfirmNeedsAPortThatAnswered(t *testing.T) {
	d := newFakeDial(errSilent)
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=3")}, Dial: d.dial,
		Confirm: Confirm{Connects: 1}}, true)
	h.scripts[0].set("10.0.0.1", Failure)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	for range 3 {
		h.round(2*time.Second, 1, 1)
	}
	if n := d.calls("10.0.0.1:10250"); n != 0 {
		t.Fatalf("%d confirmation connections to a port that never answered", n)
	}
	if st := h.status("peer"); st.Silent || st.OK || !st.Known {
		t.Fatalf("after three failures: %+v, want judged by the thresholds", st)
	}
}

func TestConfirmSpec(t *testing.T) {
	for _, tt := range []struct {
		specs string
		want  int
		port  int
	}{
		{"agent:port=9470;kubelet", 1, 10255},
		{"agent:port=9470;kubelet:port=10260", 1, 10260},
		{"agent:port=9470;http:port=8080;tcp:port=22", 1, 8080},
		{"agent:port=9470", -1, 0},
	} {
		specs, err := ParseSpecs(tt.specs)
		if err != nil {
			t.Fatal(err)
		}
		i := confirmSpec(specs)
		if i != tt.want {
			t.Errorf("confirmSpec(%s) = %d, want %d", tt.specs, i, tt.want)
			continue
		}
		if i >= 0 {
			if p := confirmPort(specs[i], Target{Host: "10.0.0.1", KubeletPort: 10255}); p != tt.port {
				t.Errorf("confirmPort(%s) = %d, want %d", tt.specs, p, tt.port)
			}
		}
	}
}

// TestConfirmAnAnswerEndsIt: once one connection is answered the others stop,
// rather than each waiting out its timeout (an hour here).
func TestConfirmAnAnswerEndsIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, errRefused
	}
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=3")}, Registerer: reg,
		Dial: dial, Confirm: Confirm{Connects: 2, Gap: 100 * time.Millisecond, Timeout: time.Hour}}, true)
	// The kubelet probe's own connections go through the scripted prober,
	// not dial: every call of dial is a confirmation's.
	h.scripts[0].set("10.0.0.1", Success)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	h.round(0, 1, 1)
	h.scripts[0].set("10.0.0.1", Failure)
	h.clk.Step(2 * time.Second)
	poll.UntilTrue(t, waitTimeout, "first connection hanging, gap armed", func() bool {
		return calls.Load() == 1 && h.clk.Waiters() == 2
	})
	h.clk.Step(100 * time.Millisecond)
	poll.UntilTrue(t, waitTimeout, "the confirmation answered", func() bool { return confirmations(t, reg, confirmAnswered) == 1 })
	if st := h.status("peer"); st.Silent || !st.OK {
		t.Fatalf("answered: %+v, want OK", st)
	}
}

// TestConfirmResendsALostSYN: a confirmation connection whose first SYN gets
// no answer sends a second at half its timeout, so a box dark for a moment
// is not judged silent by connections that all started in that moment.
func TestConfirmResendsALostSYN(t *testing.T) {
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		if calls.Add(1) == 1 {
			// The first SYN was lost: no answer until the timeout.
			<-ctx.Done()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=3")}, Registerer: reg,
		Dial: dial, Confirm: Confirm{Connects: 1, Timeout: 200 * time.Millisecond}}, true)
	h.scripts[0].set("10.0.0.1", Success)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	h.round(0, 1, 1)
	h.scripts[0].set("10.0.0.1", Failure)
	h.round(2*time.Second, 1, 1)
	poll.UntilTrue(t, waitTimeout, "the confirmation done", func() bool {
		return confirmations(t, reg, confirmAnswered)+confirmations(t, reg, confirmSilent) == 1
	})
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d connection attempts, want the first and its resend", n)
	}
	if st := h.status("peer"); st.Silent || !st.OK {
		t.Fatalf("a lost SYN, answered on its resend: %+v, want OK", st)
	}
}
