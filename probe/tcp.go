package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// tcpProber succeeds when a TCP connection opens, like the kubelet's TCP probe:
// it proves the peer's kernel and the listening process are alive, nothing more.
type tcpProber struct {
	port string
	dial func(ctx context.Context, network, address string) (net.Conn, error)
	// kubeletPortFromTarget makes a kubelet probe connect to the port the
	// target's Node publishes (see WithKubeletPort), when it has one.
	kubeletPortFromTarget bool
}

func newTCPProber(s Spec, dial func(ctx context.Context, network, address string) (net.Conn, error)) *tcpProber {
	return &tcpProber{port: strconv.Itoa(s.Port), dial: dial}
}

func (p *tcpProber) Probe(ctx context.Context, host string) (Result, error) {
	if err := checkHost(host); err != nil {
		return Unknown, err
	}
	port := p.port
	if n := KubeletPortOf(ctx); p.kubeletPortFromTarget && n > 0 {
		port = strconv.Itoa(n)
	}
	conn, err := hedgedDial(ctx, p.dial, net.JoinHostPort(host, port))
	if err != nil {
		// Refused, unreachable and timed out all mean the same to a
		// health probe.
		return Failure, fmt.Errorf("tcp probe: %w", err)
	}
	// The connection's only purpose was to open; a close error says nothing
	// about the peer.
	_ = conn.Close()
	return Success, nil
}

// Dialer is the dialer for probe connections, leaving from local when it is
// not nil. Each connection lives for one probe (TCP, HTTP and gRPC probes, and
// confirmations, all close theirs at once), so it turns TCP keep-alive off:
// Go's default turns it on with four socket options on every connection, for
// a timer that never fires, and a member of a large zone dials hundreds of
// times a second (BenchmarkDial: a loopback dial and close 62–71 µs without
// them, 69–74 with).
func Dialer(local net.Addr) *net.Dialer {
	return &net.Dialer{LocalAddr: local, KeepAlive: -1}
}

// hedgedDial opens a TCP connection within ctx's deadline, starting a second
// attempt at half of the time left when the first has had no answer by then;
// the first to connect wins, and a refusal ends it at once.
//
// Why: Linux resends a lost SYN after one second, which is the kubelet
// probe's default timeout, so one lost SYN or SYN-ACK failed the probe — one
// probe in ten at 5 % packet loss, and with it the peer's whole opinion. Two
// independent attempts within the same timeout fail together about one time
// in a hundred. A silent peer costs one more SYN and no time; the timeout and
// what a success means (a connection opened in time) stay the kubelet's.
func hedgedDial(ctx context.Context, dial func(ctx context.Context, network, address string) (net.Conn, error), address string) (net.Conn, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return dial(ctx, "tcp", address)
	}
	// The first attempt runs in the caller's goroutine and the second, if
	// any, in a timer's: a connect that is answered in time, which is
	// nearly every connect, starts no goroutine (a probe's dial grows a new
	// goroutine's stack several times, a cost a member of a large zone paid
	// hundreds of times a second).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type attempt struct {
		conn net.Conn
		err  error
	}
	second := make(chan attempt, 1)
	hedge := time.AfterFunc(time.Until(deadline)/2, func() {
		c, err := dial(ctx, "tcp", address)
		if connectOutcome(err) == confirmAnswered {
			// Connected or refused, the box answered: the first attempt,
			// still waiting, stops now.
			cancel()
		}
		second <- attempt{c, err}
	})
	conn, err := dial(ctx, "tcp", address)
	if hedge.Stop() {
		return conn, err // answered, or failed, before the hedge was due
	}
	if err == nil || connectOutcome(err) == confirmAnswered {
		// The first attempt answered while the second was trying: that
		// one stops now, and a late winner is closed.
		cancel()
		if late := <-second; late.conn != nil {
			_ = late.conn.Close()
		}
		return conn, err
	}
	late := <-second
	if late.err == nil || connectOutcome(late.err) == confirmAnswered {
		// The second answered; the first stopped then (or was silent).
		return late.conn, late.err
	}
	return nil, err
}
