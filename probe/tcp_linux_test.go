//go:build linux

package probe

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// fullBacklogPort returns a loopback port whose listener never accepts and whose
// accept queue is already full. Linux then drops new SYNs, which is how a peer
// that is up but unresponsive looks to a TCP connect.
func fullBacklogPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return port // the queue is full: SYNs are dropped from now on
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Skip("could not fill the listener's accept queue")
	return 0
}

// TestTCPProberTimeout probes a listener whose accept queue is full, so the
// kernel drops our SYN and the connect hangs until the probe's timeout.
func TestTCPProberTimeout(t *testing.T) {
	port := fullBacklogPort(t)
	p, err := NewProber(Spec{Kind: KindTCP, Port: port}, ProberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := p.Probe(ctx, "127.0.0.1")
	if got != Failure || !isTimeout(err) {
		t.Fatalf("Probe = %v, %v; want Failure after the deadline", got, err)
	}
}

// keepAliveOf reports whether TCP keep-alive is on for c's socket.
func keepAliveOf(t *testing.T, c net.Conn) bool {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		on, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return on != 0
}

// A probe connection lives for one probe, so the probe dialer sets no
// keep-alive, which Go's default dialer turns on (four socket options on
// every dial); the default dialer is the control that shows the test can
// tell the two apart.
func TestProbeDialerSetsNoKeepAlive(t *testing.T) {
	l := closingListener(t)
	for _, tc := range []struct {
		name      string
		d         *net.Dialer
		keepAlive bool
	}{
		{"probe.Dialer", Dialer(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}), false},
		{"Go's default dialer", &net.Dialer{}, true},
	} {
		c, err := tc.d.DialContext(t.Context(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := keepAliveOf(t, c); got != tc.keepAlive {
			t.Errorf("%s: keep-alive on = %v, want %v", tc.name, got, tc.keepAlive)
		}
		_ = c.Close()
	}
}

// closingListener is a loopback listener that accepts every connection and
// closes it at once, as a probed port does for a TCP probe.
func closingListener(tb testing.TB) net.Listener {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l
}

// BenchmarkDial is the time of one probe connection on loopback (dial and
// close, the listener accepting and closing too), with the probe dialer and
// with Go's default one, which also sets keep-alive.
func BenchmarkDial(b *testing.B) {
	l := closingListener(b)
	for _, bc := range []struct {
		name string
		d    *net.Dialer
	}{{"probe", Dialer(nil)}, {"default", &net.Dialer{}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				c, err := bc.d.DialContext(b.Context(), "tcp", l.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				_ = c.Close()
			}
		})
	}
}

// BenchmarkTCPProbe is one kubelet-style TCP probe on loopback, as a member
// probes each peer's kubelet port every period: the dial with its hedge, and
// the close.
func BenchmarkTCPProbe(b *testing.B) {
	l := closingListener(b)
	s, err := ParseSpec("tcp:port=" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	if err != nil {
		b.Fatal(err)
	}
	p, err := NewProber(s, ProberOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(b.Context(), time.Second)
		if res, err := p.Probe(ctx, "127.0.0.1"); res != Success {
			b.Fatalf("probe: %v (%v)", res, err)
		}
		cancel()
	}
}
