package promutil

import (
	"net"

	"github.com/prometheus/client_golang/prometheus"
)

// CountConn counts the bytes c carries into bytes, labelled by direction
// ("sent", "received"), as the network carries them (TLS included when c is
// below TLS): what an operator paying for a site's uplink, and the benchmark
// suite comparing two systems' traffic, want to know.
func CountConn(c net.Conn, bytes *prometheus.CounterVec) net.Conn {
	return &countingConn{Conn: c, sent: bytes.WithLabelValues("sent"), received: bytes.WithLabelValues("received")}
}

// CountListener counts the bytes of every connection l accepts (CountConn).
func CountListener(l net.Listener, bytes *prometheus.CounterVec) net.Listener {
	return countingListener{Listener: l, bytes: bytes}
}

type countingConn struct {
	net.Conn
	sent, received prometheus.Counter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(float64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(float64(n))
	return n, err
}

type countingListener struct {
	net.Listener
	bytes *prometheus.CounterVec
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return CountConn(c, l.bytes), nil
}
