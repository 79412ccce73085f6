package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestTCPProber(t *testing.T) {
	open := acceptingListener(t)
	closed := closedPort(t)
	tests := []struct {
		name string
		spec string
		host string
		want Result
	}{
		{"listening port", "tcp:port=" + strconv.Itoa(open), "127.0.0.1", Success},
		{"kubelet alias with explicit port", "kubelet:port=" + strconv.Itoa(open), "127.0.0.1", Success},
		{"refused", "tcp:port=" + strconv.Itoa(closed), "127.0.0.1", Failure},
		{"no host is our problem, not the peer's", "tcp:port=" + strconv.Itoa(open), "", Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProber(mustParse(t, tt.spec), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, tt.host, 5*time.Second)
			if got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			if (err == nil) != (got == Success) {
				t.Fatalf("Probe error %v does not match result %v", err, got)
			}
		})
	}
}

func TestKubeletDefaultPort(t *testing.T) {
	p, err := NewProber(Spec{Kind: KindKubelet}, ProberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*tcpProber).port; got != "10250" {
		t.Fatalf("kubelet probe port = %s, want 10250", got)
	}
}

// TestProbesUseTheInjectedDialer shows probes leave from the address the
// caller chose (the agent binds its advertise address), for every kind that
// dials itself.
func TestProbesUseTheInjectedDialer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	from := make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			from <- host
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.7")}}
	for _, spec := range []string{"tcp:port=%d", "http:port=%d"} {
		p, err := NewProber(mustParse(t, fmt.Sprintf(spec, port)), ProberOptions{Dial: d.DialContext})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		p.Probe(ctx, "127.0.0.1")
		cancel()
		if got := <-from; got != "127.0.0.7" {
			t.Errorf("%s probe left from %s, want 127.0.0.7", spec, got)
		}
	}
}

// TestKubeletPortFollowsTheTarget: a kubelet probe that names no port
// connects to the port the target's Node publishes, and to 10250 for a target
// that publishes none; one that names a port keeps it.
func TestKubeletPortFollowsTheTarget(t *testing.T) {
	dialed := make(chan string, 1)
	dial := func(_ context.Context, _, address string) (net.Conn, error) {
		dialed <- address
		return nil, errors.New("not dialing in this test")
	}
	tests := []struct {
		spec        string
		kubeletPort int
		want        string
	}{
		{"kubelet", 10350, "127.0.0.1:10350"},
		{"kubelet", 0, "127.0.0.1:10250"},
		{"kubelet:port=10255", 10350, "127.0.0.1:10255"},
		{"tcp:port=22", 10350, "127.0.0.1:22"},
	}
	for _, tt := range tests {
		p, err := NewProber(mustParse(t, tt.spec), ProberOptions{Dial: dial})
		if err != nil {
			t.Fatal(err)
		}
		if res, _ := p.Probe(WithKubeletPort(context.Background(), tt.kubeletPort), "127.0.0.1"); res != Failure {
			t.Errorf("%s: %v from a dial that fails, want Failure", tt.spec, res)
		}
		if got := <-dialed; got != tt.want {
			t.Errorf("%s with the target's kubelet port %d dialed %s, want %s", tt.spec, tt.kubeletPort, got, tt.want)
		}
	}
}

// scriptedDial answers the n-th dial with script[n]: "silent" waits for the
// dial's context, "refused" refuses, "open" connects, and "late" connects once
// a second dial has started. It keeps the connections it opened.
type scriptedDial struct {
	mu     sync.Mutex
	script []string
	calls  int
	opened []net.Conn
	second chan struct{} // closed by the second dial
}

func (d *scriptedDial) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	d.mu.Lock()
	what := "silent"
	if d.calls < len(d.script) {
		what = d.script[d.calls]
	}
	d.calls++
	if d.calls == 2 && d.second != nil {
		close(d.second)
	}
	d.mu.Unlock()
	switch what {
	case "refused":
		return nil, errRefused
	case "late":
		select {
		case <-d.second:
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
		}
		fallthrough
	case "open":
		c1, c2 := net.Pipe()
		c2.Close()
		d.mu.Lock()
		d.opened = append(d.opened, c1)
		d.mu.Unlock()
		return c1, nil
	}
	<-ctx.Done()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
}

func (d *scriptedDial) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// TestTCPProbeHedgesALostSYN: a connect with no answer at half the timeout
// gets a second attempt, which a lost SYN would otherwise have cost the
// probe; a refusal is an answer and ends the probe at once.
func TestTCPProbeHedgesALostSYN(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script []string
		want   Result
		dials  int
	}{
		{"first SYN lost, second answered", []string{"silent", "open"}, Success, 2},
		{"first SYN lost, second refused", []string{"silent", "refused"}, Failure, 2},
		{"first answered after the second started", []string{"late", "silent"}, Success, 2},
		{"both answered", []string{"late", "open"}, Success, 2},
		{"first answered", []string{"open"}, Success, 1},
		{"refused", []string{"refused"}, Failure, 1},
		{"silent", nil, Failure, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &scriptedDial{script: tt.script, second: make(chan struct{})}
			p, err := NewProber(mustParse(t, "tcp:port=10250"), ProberOptions{Dial: d.dial})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			got, err := p.Probe(ctx, "10.0.0.1")
			if got != tt.want || d.count() != tt.dials {
				t.Fatalf("Probe = %v (%v) after %d dials, want %v after %d", got, err, d.count(), tt.want, tt.dials)
			}
			// Every connection a dial opened is closed by the time the
			// probe returns: the probe's own, and a late winner's.
			for i, c := range d.opened {
				if _, err := c.Write([]byte{0}); !errors.Is(err, io.ErrClosedPipe) {
					t.Errorf("connection %d still open after the probe (write: %v)", i, err)
				}
			}
		})
	}
}
