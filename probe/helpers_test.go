package probe

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/poll"
)

// waitTimeout bounds every poll.UntilTrue of these tests: generous, since it
// only matters when a test fails.
const waitTimeout = 10 * time.Second

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mustParse(t *testing.T, text string) Spec {
	t.Helper()
	s, err := ParseSpec(text)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", text, err)
	}
	return s
}

// errScripted explains the scripted failures of scriptProber.
var errScripted = errors.New("scripted failure")

// scriptProber returns, for each host, whatever the test last set.
type scriptProber struct {
	mu      sync.Mutex
	results map[string]Result
	calls   map[string]int
}

func newScriptProber() *scriptProber {
	return &scriptProber{results: make(map[string]Result), calls: make(map[string]int)}
}

func (p *scriptProber) set(host string, r Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.results[host] = r
}

func (p *scriptProber) callsTo(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[host]
}

func (p *scriptProber) Probe(_ context.Context, host string) (Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[host]++
	switch r := p.results[host]; r {
	case Success:
		return Success, nil
	case Failure:
		return Failure, errScripted
	default:
		return Unknown, errors.New("no script for host " + host)
	}
}

// countingProber counts every probe, so a test knows when a round is done.
type countingProber struct {
	Prober
	calls *atomic.Int64
}

func (p countingProber) Probe(ctx context.Context, host string) (Result, error) {
	r, err := p.Prober.Probe(ctx, host)
	p.calls.Add(1)
	return r, err
}

// gridStart is where the tests' fake clocks start: midnight UTC, a start of
// slot 0 of every period that divides a day on the grid probes start on
// (internal/slots), so that a worker started there with rand 0 probes at
// once.
var gridStart = time.Unix(1_699_920_000, 0)

// harness runs a Manager on a fake clock from gridStart with rand fixed at 0,
// so a worker started while the clock stands on a period boundary probes the
// moment it starts, and later every period.
type harness struct {
	t       *testing.T
	m       *Manager
	clk     *clocktesting.FakeClock
	scripts []*scriptProber // per spec; nil entries run the real prober
	calls   atomic.Int64
}

// startHarness builds and runs a Manager from cfg. With scripted, every spec's
// prober is replaced by a scriptProber.
func startHarness(t *testing.T, cfg Config, scripted bool) *harness {
	t.Helper()
	h := &harness{t: t, clk: clocktesting.NewFakeClock(gridStart)}
	cfg.Clock = ClockOf(h.clk)
	cfg.Rand = func() float64 { return 0 }
	if cfg.Confirm == (Confirm{}) {
		// The scripted probes' tests are about the thresholds; the
		// confirmation's own tests turn it on.
		cfg.Confirm.Connects = -1
	}
	if cfg.Dial == nil && scripted {
		cfg.Dial = noDial(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.m = m
	for i := range m.probers {
		var inner = m.probers[i]
		var sp *scriptProber
		if scripted {
			sp = newScriptProber()
			inner = sp
		}
		h.scripts = append(h.scripts, sp)
		m.probers[i] = countingProber{Prober: inner, calls: &h.calls}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// round waits until armed workers wait on the clock, steps it by d, and waits
// until fire of them have probed, reported and re-armed.
func (h *harness) round(d time.Duration, fire, armed int) {
	h.t.Helper()
	poll.UntilTrue(h.t, waitTimeout, strconv.Itoa(armed)+" armed workers", func() bool { return h.clk.Waiters() == armed })
	before := h.calls.Load()
	h.clk.Step(d)
	poll.UntilTrue(h.t, waitTimeout, strconv.Itoa(fire)+" probes", func() bool {
		return h.calls.Load() >= before+int64(fire) && h.clk.Waiters() == armed
	})
}

func (h *harness) status(name string) TargetStatus {
	h.t.Helper()
	st, ok := h.m.Status(name)
	if !ok {
		h.t.Fatalf("no status for target %q", name)
	}
	return st
}

// drain empties the Changes channel and reports whether it held a signal.
func drain(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// hangingListener accepts connections on loopback and never answers, like a
// peer whose process is wedged.
func hangingListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// acceptingListener accepts and closes connections on loopback.
func acceptingListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// isTimeout reports whether err says the probe ran out of time. The net package
// reports a context deadline either as the context's error or as its own i/o
// timeout, depending on which fires first.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// newTLSServer starts an httptest TLS server whose expected handshake errors
// (tests probe it without trusting it) do not clutter the test output.
func newTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

func probeWithin(t *testing.T, p Prober, host string, timeout time.Duration) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Probe(ctx, host)
}

// noDial fails a test that would open a connection: its hosts are not ours
// to send packets to.
func noDial(t *testing.T) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(_ context.Context, network, address string) (net.Conn, error) {
		t.Errorf("unexpected dial %s %s", network, address)
		return nil, syscall.ECONNREFUSED
	}
}
