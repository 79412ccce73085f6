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
