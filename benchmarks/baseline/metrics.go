package baseline

import (
	"net"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names the harness scrapes. They mirror edgequorum's so the two are
// counted the same way: bytes at the connection layer, TLS-free here because
// SuperEdge's exchange is plain HTTP.
const (
	MetricBytes    = "edgehealth_transport_bytes_total"
	MetricRequests = "edgehealth_exchange_requests_total"
	MetricWrites   = "edgehealth_node_writes_total"
)

type metrics struct {
	bytes    *prometheus.CounterVec
	requests *prometheus.CounterVec
	writes   *prometheus.CounterVec
	rejected prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytes,
			Help: "Bytes sent and received on exchange connections (HTTP included), both as client and as server.",
		}, []string{"direction"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Exchange PUTs sent (out, every try) and served (in).",
		}, []string{"direction"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWrites,
			Help: "Node Updates this daemon made for its votes, by result.",
		}, []string{"result"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgehealth_exchange_rejected_total",
			Help: "Exchange messages refused for a bad HMAC.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.bytes, m.requests, m.writes, m.rejected)
	}
	return m
}

// countingConn counts what crosses one exchange connection.
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

func (m *metrics) count(c net.Conn) net.Conn {
	return &countingConn{Conn: c, sent: m.bytes.WithLabelValues("sent"), received: m.bytes.WithLabelValues("received")}
}

// countingListener counts the server side of the exchange.
type countingListener struct {
	net.Listener
	m *metrics
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.m.count(c), nil
}
