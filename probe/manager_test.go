package probe

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/poll"
)

func TestConfigValidate(t *testing.T) {
	okProber := ProberFunc(func(context.Context, string) (Result, error) { return Success, nil })
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; nil means valid
	}{
		{"zero config is valid", Config{}, nil},
		{"explicit specs", Config{Specs: []Spec{{Kind: KindKubelet, Weight: 0.5}, {Kind: KindHTTP, Port: 8080, Weight: 0.5}},
			ScoreLine: 50}, nil},
		{"bad spec names its index and key", Config{Specs: []Spec{{Kind: KindKubelet}, {Kind: KindTCP}}},
			[]string{"Config.Specs[1]", "port"}},
		{"score line", Config{ScoreLine: 120}, []string{"Config.ScoreLine", "120"}},
		{"negative score line", Config{ScoreLine: -1}, []string{"Config.ScoreLine"}},
		{"grid phase", Config{GridPhase: 0.4}, nil},
		{"grid phase of a whole slot", Config{GridPhase: 1}, []string{"Config.GridPhase", "[0, 1)"}},
		{"negative grid phase", Config{GridPhase: -0.5}, []string{"Config.GridPhase", "-0.5"}},
		{"weights", Config{Specs: []Spec{{Kind: KindKubelet, Weight: 0.5}, {Kind: KindHTTP, Weight: 0.4}}},
			[]string{"Config.Specs", "sum to 0.9", "kubelet:weight=0.5", "http:weight=0.4"}},
		{"agent without transport", Config{Specs: []Spec{{Kind: KindAgent}}},
			[]string{"Config.AgentClient", "agent", "AgentProber"}},
		{"agent with client", Config{Specs: []Spec{{Kind: KindAgent}}, AgentClient: &http.Client{}}, nil},
		{"agent with prober", Config{Specs: []Spec{{Kind: KindAgent}}, AgentProber: okProber}, nil},
		{"both agent transports", Config{AgentClient: &http.Client{}, AgentProber: okProber},
			[]string{"Config.AgentClient", "Config.AgentProber"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, sub := range tt.wantErr {
				if !strings.Contains(err.Error(), sub) {
					t.Errorf("Validate() = %q, does not mention %q", err, sub)
				}
			}
			if _, nerr := New(tt.cfg); nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New() error = %v, want the Validate error", nerr)
			}
		})
	}
}

func TestNewAgentWithoutTransport(t *testing.T) {
	_, err := New(Config{Specs: []Spec{{Kind: KindKubelet, Weight: 0.5}, {Kind: KindAgent, Weight: 0.5}}})
	if !errors.Is(err, ErrNoAgentTransport) {
		t.Fatalf("New() = %v, want ErrNoAgentTransport", err)
	}
}

// TestManagerThresholds runs a scripted target through a Manager round by round
// and checks the state, Known and OK it reports after each round.
func TestManagerThresholds(t *testing.T) {
	S, F, U := Success, Failure, Unknown
	tests := []struct {
		name string
		spec string
		raw  []Result
		want []Result
	}{
		{"fails twice then succeeds under failure threshold 3", "tcp:port=1,failure-threshold=3",
			[]Result{F, F, S, F, F, S}, []Result{U, U, S, S, S, S}},
		{"flips to failure and back", "tcp:port=1,failure-threshold=3",
			[]Result{S, F, F, F, S}, []Result{S, S, S, F, S}},
		{"success threshold 2", "tcp:port=1,success-threshold=2,failure-threshold=1",
			[]Result{S, S, F, S, S}, []Result{U, S, F, F, S}},
		{"prober errors do not count", "tcp:port=1,failure-threshold=2",
			[]Result{F, U, F, U, S}, []Result{U, U, F, F, S}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startHarness(t, Config{Specs: []Spec{mustParse(t, tt.spec)}}, true)
			h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
			for i, r := range tt.raw {
				h.scripts[0].set("10.0.0.1", r)
				step := 2 * time.Second
				if i == 0 {
					step = 0
				}
				h.round(step, 1, 1)
				st := h.status("peer")
				want := tt.want[i]
				if got := st.Probes[0].State; got != want {
					t.Fatalf("round %d (raw %v): state %v, want %v", i+1, tt.raw[:i+1], got, want)
				}
				if st.Probes[0].Last != r {
					t.Fatalf("round %d: last raw result %v, want %v", i+1, st.Probes[0].Last, r)
				}
				if st.Known != (want != U) || st.OK != (want == S) {
					t.Fatalf("round %d: Known=%v OK=%v for state %v", i+1, st.Known, st.OK, want)
				}
			}
		})
	}
}

// TestManagerScoreLine checks weights and the score line through the Manager.
func TestManagerScoreLine(t *testing.T) {
	specs := []Spec{
		mustParse(t, "kubelet:weight=0.5,failure-threshold=1"),
		mustParse(t, "http:port=80,weight=0.3,failure-threshold=1"),
		mustParse(t, "grpc:port=9,weight=0.2,failure-threshold=1"),
	}
	h := startHarness(t, Config{Specs: specs, ScoreLine: 70}, true)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	S, F := Success, Failure
	tests := []struct {
		states    [3]Result
		wantScore float64
		wantOK    bool
	}{
		{[3]Result{S, S, S}, 100, true},
		{[3]Result{S, F, S}, 70, true},
		{[3]Result{S, S, F}, 80, true},
		{[3]Result{F, S, S}, 50, false},
		{[3]Result{S, F, F}, 50, false},
		{[3]Result{F, F, F}, 0, false},
	}
	for i, tt := range tests {
		for j, r := range tt.states {
			h.scripts[j].set("10.0.0.1", r)
		}
		step := 2 * time.Second
		if i == 0 {
			step = 0
		}
		h.round(step, 3, 3)
		st := h.status("peer")
		if !st.Known || st.Score != tt.wantScore || st.OK != tt.wantOK {
			t.Errorf("states %v: Known=%v Score=%v OK=%v, want Known, Score=%v OK=%v",
				tt.states, st.Known, st.Score, st.OK, tt.wantScore, tt.wantOK)
		}
	}
}

// TestManagerKnownNeedsEveryProbe checks that a target is not judged until each
// of its probes has met a threshold, and that the change notification fires when
// it is.
func TestManagerKnownNeedsEveryProbe(t *testing.T) {
	specs := []Spec{
		mustParse(t, "kubelet:failure-threshold=1"),
		mustParse(t, "http:port=80,failure-threshold=3"),
	}
	h := startHarness(t, Config{Specs: specs, ScoreLine: 50}, true)
	h.scripts[0].set("10.0.0.1", Failure)
	h.scripts[1].set("10.0.0.1", Failure)

	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	if st := h.status("peer"); st.Known || st.OK || st.Probes[0].State != Unknown {
		t.Fatalf("fresh target: %+v, want unknown", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("adding a target did not signal a change")
	}

	h.round(0, 2, 2)
	st := h.status("peer")
	if st.Known || st.Probes[0].State != Failure || st.Probes[1].State != Unknown {
		t.Fatalf("after one failure: %+v, want kubelet Failure, http Unknown, not Known", st)
	}
	if drain(h.m.Changes()) {
		t.Fatal("a change was signalled although Known, OK and Score stayed the same")
	}

	h.round(2*time.Second, 2, 2)
	if st := h.status("peer"); st.Known {
		t.Fatalf("after two failures: %+v, want not Known", st)
	}
	h.round(2*time.Second, 2, 2)
	st = h.status("peer")
	if !st.Known || st.OK || st.Score != 0 {
		t.Fatalf("after three failures: %+v, want Known and not OK", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("becoming Known did not signal a change")
	}

	h.scripts[0].set("10.0.0.1", Success)
	h.scripts[1].set("10.0.0.1", Success)
	h.round(2*time.Second, 2, 2)
	st = h.status("peer")
	if !st.OK || st.Score != 100 {
		t.Fatalf("after recovery: %+v, want OK at 100", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("recovering did not signal a change")
	}
}

// TestManagerTargetsAtRuntime adds, replaces and removes targets while the
// Manager runs and checks that idle workers hold no goroutine and removed
// ones leave no timer behind.
func TestManagerTargetsAtRuntime(t *testing.T) {
	port := acceptingListener(t)
	specs := []Spec{
		{Kind: KindTCP, Port: port, FailureThreshold: 1},
		{Kind: KindKubelet, Port: port, FailureThreshold: 1},
	}
	h := startHarness(t, Config{Specs: specs}, false)
	poll.UntilTrue(t, waitTimeout, "Run to start", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return h.m.runCtx != nil
	})
	baseline := runtime.NumGoroutine()

	names := []string{"a", "b", "c"}
	for _, n := range names {
		h.m.AddTarget(n, Target{Host: "127.0.0.1"})
	}
	h.round(0, 6, 6)
	// Six armed workers are six timers, not six goroutines: between probes
	// a worker holds none.
	poll.UntilTrue(t, waitTimeout, "no goroutine held by an idle worker", func() bool {
		return runtime.NumGoroutine() <= baseline && h.clk.Waiters() == 6
	})
	for _, n := range names {
		if st := h.status(n); !st.OK || !st.Known {
			t.Fatalf("target %s: %+v, want OK", n, st)
		}
	}

	// Re-adding with the same host keeps the target and its evidence.
	h.m.AddTarget("a", Target{Host: "127.0.0.1"})
	if st := h.status("a"); !st.OK {
		t.Fatalf("re-adding an unchanged target reset it: %+v", st)
	}
	// A new host replaces the workers and starts over.
	drain(h.m.Changes())
	h.m.AddTarget("a", Target{Host: "127.0.0.2"})
	if st := h.status("a"); st.Known || st.Host != "127.0.0.2" {
		t.Fatalf("replaced target: %+v, want unknown at the new host", st)
	}
	if !drain(h.m.Changes()) {
		t.Fatal("replacing a target did not signal a change")
	}

	for _, n := range names {
		h.m.RemoveTarget(n)
		if _, ok := h.m.Status(n); ok {
			t.Fatalf("target %s still has a status after removal", n)
		}
	}
	h.m.RemoveTarget("never-added")
	if len(h.m.Statuses()) != 0 {
		t.Fatalf("Statuses() = %v after removing every target", h.m.Statuses())
	}
	poll.UntilTrue(t, waitTimeout, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseline })
	if n := h.clk.Waiters(); n != 0 {
		t.Fatalf("%d timers left on the clock after removing every target", n)
	}
}

// Targets added at different times whose probes drew the same slot are
// probed in the same instant, so a member wakes once for them: a target added
// between two probes of another waits for the other's next one instead of
// probing at once.
func TestManagerProbesOfOneSlotRunTogether(t *testing.T) {
	h := startHarness(t, Config{Specs: []Spec{{Kind: KindTCP, Port: 1, FailureThreshold: 1}}}, true)
	h.scripts[0].set("10.0.0.1", Success)
	h.scripts[0].set("10.0.0.2", Success)
	h.m.AddTarget("a", Target{Host: "10.0.0.1"})
	// The harness's clock starts on a period boundary and its rand is 0:
	// a's slot starts at once.
	h.round(0, 1, 1)
	h.clk.Step(700 * time.Millisecond)
	h.m.AddTarget("b", Target{Host: "10.0.0.2"})
	h.round(0, 0, 2)
	if n := h.scripts[0].callsTo("10.0.0.2"); n != 0 {
		t.Fatalf("b was probed %d times on being added between two of a's probes; want none before a's next", n)
	}
	h.round(1300*time.Millisecond, 2, 2)
	a, b := h.status("a").Probes[0], h.status("b").Probes[0]
	if !a.At.Equal(b.At) || a.State != Success || b.State != Success {
		t.Fatalf("a probed at %v (%v), b at %v (%v); want one instant, both succeeded", a.At, a.State, b.At, b.State)
	}
}

// TestManagerReplacedTargetIgnoresOldHost checks that after a host change only
// the new host is probed and judged.
func TestManagerReplacedTargetIgnoresOldHost(t *testing.T) {
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=1")}}, true)
	h.scripts[0].set("10.0.0.1", Success)
	h.scripts[0].set("10.0.0.2", Failure)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	h.round(0, 1, 1)
	if st := h.status("peer"); !st.OK {
		t.Fatalf("old host: %+v, want OK", st)
	}
	h.m.AddTarget("peer", Target{Host: "10.0.0.2"})
	before := h.scripts[0].callsTo("10.0.0.1")
	h.round(0, 1, 1)
	st := h.status("peer")
	if !st.Known || st.OK || st.Host != "10.0.0.2" {
		t.Fatalf("new host: %+v, want Known, not OK", st)
	}
	if n := h.scripts[0].callsTo("10.0.0.1"); n != before {
		t.Fatalf("old host probed %d more times after the replacement", n-before)
	}
}

func TestManagerTargetsBeforeAndAfterRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	m, err := New(Config{Clock: ClockOf(clk), Rand: func() float64 { return 0 }, Logger: discardLogger(),
		AgentProber: ProberFunc(func(context.Context, string) (Result, error) { return Success, nil }),
		Specs:       []Spec{{Kind: KindAgent}}})
	if err != nil {
		t.Fatal(err)
	}
	m.AddTarget("early", Target{Host: "10.0.0.1"})
	if st, ok := m.Status("early"); !ok || st.Known {
		t.Fatalf("Status before Run = %+v, %v; want an unknown target", st, ok)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	poll.UntilTrue(t, waitTimeout, "worker of the early target", func() bool { return clk.Waiters() == 1 })
	clk.Step(0)
	poll.UntilTrue(t, waitTimeout, "the agent probe to pass", func() bool { st, _ := m.Status("early"); return st.OK })

	if err := m.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	// After Run, targets are still tracked but nothing probes them.
	m.AddTarget("late", Target{Host: "10.0.0.2"})
	if _, ok := m.Status("late"); !ok || clk.Waiters() != 0 {
		t.Fatalf("late target: tracked %v, %d timers; want tracked with none", ok, clk.Waiters())
	}
}

// TestManagerStatusesAreCopies checks that a caller cannot change the Manager's
// state through what Status returns.
func TestManagerStatusesAreCopies(t *testing.T) {
	h := startHarness(t, Config{}, true)
	h.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	st := h.status("peer")
	st.Probes[0].State = Success
	if h.status("peer").Probes[0].State != Unknown {
		t.Fatal("changing a returned status changed the Manager's")
	}
	if got := h.m.Statuses()["peer"]; got.Probes[0].Spec != "kubelet" || got.Probes[0].Weight != 1 {
		t.Fatalf("Statuses()[peer].Probes[0] = %+v, want the default kubelet probe with weight 1", got.Probes[0])
	}
}

// TestManagerManyTargetsConcurrently adds and removes targets from several
// goroutines while rounds run, for the race detector.
func TestManagerManyTargetsConcurrently(t *testing.T) {
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:failure-threshold=1")}}, true)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 20 {
				name := "peer-" + strconv.Itoa(g) + "-" + strconv.Itoa(i%3)
				h.m.AddTarget(name, Target{Host: "10.0.0." + strconv.Itoa(i%5)})
				_ = h.m.Statuses()
				if i%2 == 1 {
					h.m.RemoveTarget(name)
				}
				h.clk.Step(time.Second)
			}
		}()
	}
	for range 4 {
		<-done
	}
	for name := range h.m.Statuses() {
		h.m.RemoveTarget(name)
	}
	poll.UntilTrue(t, waitTimeout, "every worker stopped", func() bool { return h.clk.Waiters() == 0 })
}

// hangProber answers at once for every host but hung, whose probes wait
// until release is closed (or their timeout).
type hangProber struct {
	hung    string
	release chan struct{}
	mu      sync.Mutex
	calls   map[string]int
}

func (p *hangProber) Probe(ctx context.Context, host string) (Result, error) {
	p.mu.Lock()
	p.calls[host]++
	p.mu.Unlock()
	if host != p.hung {
		return Success, nil
	}
	select {
	case <-p.release:
		return Success, nil
	case <-ctx.Done():
		return Failure, ctx.Err()
	}
}

func (p *hangProber) callsTo(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[host]
}

// TestManagerSlowTargetDelaysNoOther: a target whose probe hangs delays no
// other target's probes, which keep their period; once it answers, its own
// schedule resumes at the next boundary.
func TestManagerSlowTargetDelaysNoOther(t *testing.T) {
	h := startHarness(t, Config{Specs: []Spec{mustParse(t, "kubelet:period=10s,timeout=9s,failure-threshold=1")}}, false)
	p := &hangProber{hung: "10.0.0.9", release: make(chan struct{}), calls: map[string]int{}}
	t.Cleanup(func() {
		select {
		case <-p.release:
		default:
			close(p.release)
		}
	})
	h.m.probers[0] = countingProber{Prober: p, calls: &h.calls}
	h.m.AddTarget("slow", Target{Host: "10.0.0.9"})
	h.m.AddTarget("fast", Target{Host: "10.0.0.1"})

	poll.UntilTrue(t, waitTimeout, "both workers armed", func() bool { return h.clk.Waiters() == 2 })
	h.clk.Step(0)
	poll.UntilTrue(t, waitTimeout, "fast probed and re-armed while slow hangs", func() bool {
		return p.callsTo("10.0.0.1") == 1 && p.callsTo("10.0.0.9") == 1 && h.clk.Waiters() == 1
	})
	for want := 2; want <= 3; want++ {
		h.clk.Step(10 * time.Second)
		poll.UntilTrue(t, waitTimeout, "fast probed on its period", func() bool {
			return p.callsTo("10.0.0.1") == want && h.clk.Waiters() == 1
		})
		if n := p.callsTo("10.0.0.9"); n != 1 {
			t.Fatalf("slow target probed %d times while its first probe hangs, want 1", n)
		}
	}
	close(p.release)
	poll.UntilTrue(t, waitTimeout, "slow target re-armed once it answered", func() bool { return h.clk.Waiters() == 2 })
	if st := h.status("fast"); !st.OK {
		t.Fatalf("fast target: %+v, want OK", st)
	}
}
